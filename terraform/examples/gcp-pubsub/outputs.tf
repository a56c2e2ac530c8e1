output "endpoint_url" {
  description = "The relay's Cloud Run URL."
  value       = module.relay.endpoint_url
}

output "dss_subscription" {
  description = "JSON body for PUT /v1/subscriptions?replica=gcp (add hmac_secret_key from hmac_secret)."
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

output "subscription_name" {
  description = "Pull subscription on the topic (gcloud pubsub subscriptions pull)."
  value       = google_pubsub_subscription.smoke.name
}
