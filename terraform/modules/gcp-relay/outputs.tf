################################################################################
# Endpoint and DSS subscription
################################################################################

output "endpoint_url" {
  description = "The Cloud Run service URL (https://<name>-<hash>-<region>.a.run.app)."
  value       = google_cloud_run_v2_service.this.uri
}

output "callback_url" {
  description = "The service URL with callback_path: the subscription's callback_url."
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

output "hmac_secret_id" {
  description = "Secret Manager secret holding RELAY_HMAC_KEYS (projects/P/secrets/S)."
  value       = google_secret_manager_secret.hmac.id
}

################################################################################
# Service and identity
################################################################################

output "service_name" {
  description = "Name of the Cloud Run service."
  value       = google_cloud_run_v2_service.this.name
}

output "service_account_email" {
  description = "Email of the relay's service account: the member a topic owner grants roles/pubsub.publisher (gcp-topic-grant)."
  value       = google_service_account.this.email
}

################################################################################
# Pub/Sub topic
################################################################################

output "topic_id" {
  description = "RELAY_PUBSUB_TOPIC: the topic the relay publishes to (projects/P/topics/T)."
  value       = local.topic_id
}
