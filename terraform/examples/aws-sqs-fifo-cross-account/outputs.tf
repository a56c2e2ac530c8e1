output "endpoint_url" {
  description = "The relay's Function URL."
  value       = module.relay.endpoint_url
}

output "dss_subscription" {
  description = "JSON body for PUT /v1/subscriptions?replica=aws (add hmac_secret_key from hmac_secret)."
  value       = module.relay.dss_subscription
}

output "hmac_key_id" {
  description = "keyId of the subscription (relay send --key-id)."
  value       = module.relay.hmac_key_id
}

output "hmac_secret" {
  description = "The subscription's hmac_secret_key (RELAY_SEND_SECRET for relay send)."
  value       = module.relay.hmac_secret
  sensitive   = true
}

output "queue_url" {
  description = "The subscriber's FIFO queue (read it with the subscriber's credentials)."
  value       = aws_sqs_queue.subscriber.url
}

output "relay_role_arn" {
  description = "The relay's execution role, the only principal the queue policy lets send."
  value       = module.relay.role_arn
}
