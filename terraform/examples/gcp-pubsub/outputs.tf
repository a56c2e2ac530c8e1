output "endpoint_url" {
  description = "The relay's Cloud Run URL."
  value       = module.relay.endpoint_url
}

output "dss_subscription" {
  description = "JSON body for PUT /v1/subscriptions?replica=gcp (add hmac_secret_key, read from the hmac_secret_version secret version)."
  value       = module.relay.dss_subscription
}

output "hmac_key_id" {
  description = "keyId of the subscription (relay send --key-id)."
  value       = module.relay.hmac_key_id
}

# The secret itself is no output (outputs are kept in the state): read it from Secret Manager.
output "hmac_secret_version" {
  description = "Secret Manager version holding {\"<hmac_key_id>\": \"<secret>\"}: the subscription's hmac_secret_key, and RELAY_SEND_SECRET for relay send."
  value       = module.relay.hmac_secret_version
}

output "subscription_name" {
  description = "Pull subscription on the topic (gcloud pubsub subscriptions pull)."
  value       = google_pubsub_subscription.smoke.name
}

output "dead_letter_subscription_name" {
  description = "Subscription of the dead-letter topic: notifications the smoke subscription's consumer failed to acknowledge 5 times (the relay's dead-letter alert watches it)."
  value       = google_pubsub_subscription.dead_letter.name
}

output "image" {
  description = "The relay-gcf image the service runs: var.image, or the one Cloud Build built from this checkout."
  value       = var.image != null ? var.image : module.image[0].image
}

output "alert_policy_names" {
  description = "The relay's alert policies in Cloud Monitoring (needs_operator, bad_signature, unavailable, platform_errors, dead_letters, undelivered, verified_refused, metric_lines_dropped)."
  value       = module.relay.alert_policy_names
}

output "dashboard_url" {
  description = "The relay's Cloud Monitoring dashboard in the console."
  value       = module.relay.dashboard_url
}

output "routes_url" {
  description = "The stored routes document (gs://<bucket>/<object>): RELAY_ROUTES_URL for relay routes and relay split."
  value       = module.relay.routes_url
}

output "split_prefix" {
  description = "Name prefix of the split topics and subscriptions relay split start --create makes."
  value       = module.relay.split_prefix
}

output "service_account_email" {
  description = "The relay's service account: relay split start --create --grant-to serviceAccount:<it>."
  value       = module.relay.service_account_email
}

output "topic_id" {
  description = "The relay's topic, projects/<project>/topics/<topic>: relay split start --create --like it."
  value       = module.relay.topic_id
}

output "ledger_url" {
  description = "The delivery ledger (firestore://<project>/<database>/<collection>): RELAY_LEDGER_URL for relay trace."
  value       = module.relay.ledger_url
}

output "archive_key_secret" {
  description = "The archive's key, a Secret Manager secret: RELAY_ARCHIVE_KEY for relay replay is its latest version."
  value       = module.relay.archive_key_secret
}

output "archive_url" {
  description = "The archive (gs://<bucket>/<prefix>): RELAY_ARCHIVE_URL for relay replay."
  value       = module.relay.archive_url
}

output "replay_environment" {
  description = "The RELAY_* variables relay replay, relay trace and relay split start --backfill run with (the relay's own, without its keys)."
  value       = module.relay.replay_environment
}
