output "topic" {
  description = "The topic the relay may publish to, as given."
  value       = google_pubsub_topic_iam_member.relay_publisher.topic
}

output "role" {
  description = "The role granted on the topic."
  value       = google_pubsub_topic_iam_member.relay_publisher.role
}

output "member" {
  description = "The member granted the role (serviceAccount:<email>)."
  value       = google_pubsub_topic_iam_member.relay_publisher.member
}
