################################################################################
# Endpoint and DSS subscription
################################################################################

output "endpoint_url" {
  description = "The Function URL (https://<id>.lambda-url.<region>.on.aws/)."
  value       = aws_lambda_function_url.this.function_url
}

output "callback_url" {
  description = "The Function URL with callback_path: the subscription's callback_url."
  value       = local.callback_url
}

output "dss_subscription" {
  description = "JSON body for PUT /v1/subscriptions on the DSS, without the secret: add hmac_secret_key from the hmac_secret output."
  value = jsonencode({
    callback_url = local.callback_url
    method       = "POST"
    encoding     = "application/json"
    hmac_key_id  = local.hmac_key_id
  })
}

output "hmac_key_id" {
  description = "keyId the DSS signs with (the subscription's hmac_key_id)."
  value       = local.hmac_key_id
}

output "hmac_secret" {
  description = "HMAC secret shared with the DSS (the subscription's hmac_secret_key)."
  value       = local.hmac_secret
  sensitive   = true
}

output "hmac_secret_arn" {
  description = "ARN of the Secrets Manager secret holding RELAY_HMAC_KEYS."
  value       = aws_secretsmanager_secret.hmac.arn
}

################################################################################
# Lambda function
################################################################################

output "function_name" {
  description = "Name of the Lambda function."
  value       = aws_lambda_function.this.function_name
}

output "function_arn" {
  description = "ARN of the Lambda function."
  value       = aws_lambda_function.this.arn
}

output "role_arn" {
  description = "ARN of the function's execution role: the principal a cross-account queue policy (aws-queue-grant) lets send."
  value       = aws_iam_role.this.arn
}

output "role_name" {
  description = "Name of the function's execution role."
  value       = aws_iam_role.this.name
}

output "log_group_name" {
  description = "CloudWatch log group of the function."
  value       = aws_cloudwatch_log_group.this.name
}

################################################################################
# SQS queue
################################################################################

output "queue_arn" {
  description = "ARN of the queue the relay publishes to (created or existing); null without a queue."
  value       = local.queue_arn
}

output "queue_url" {
  description = "URL of the queue the relay publishes to (created or existing); null without a queue."
  value       = local.queue_url
}

output "dlq_arn" {
  description = "ARN of the created dead-letter queue; null when the queue was not created here."
  value       = try(aws_sqs_queue.dlq[0].arn, null)
}

output "dlq_url" {
  description = "URL of the created dead-letter queue; null when the queue was not created here."
  value       = try(aws_sqs_queue.dlq[0].url, null)
}
