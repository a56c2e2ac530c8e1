output "policy_json" {
  description = "The queue policy now on the queue."
  value       = data.aws_iam_policy_document.this.json
}

output "queue_arn" {
  description = "ARN of the queue the relay may send to."
  value       = var.queue_arn
}

output "granted_actions" {
  description = "Actions the relay's role is allowed on the queue."
  value       = ["sqs:SendMessage"]
}
