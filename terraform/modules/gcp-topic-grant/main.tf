# The subscriber's side of a cross-project relay: the relay's service account may publish to this
# one topic, and nothing else in the project.
resource "google_pubsub_topic_iam_member" "relay_publisher" {
  project = var.project_id
  topic   = var.topic
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${var.relay_service_account_email}"
}
