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
  description = "JSON body for PUT /v1/subscriptions on the DSS, without the secret: add hmac_secret_key, read from Secret Manager (hmac_secret_version)."
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

# No hmac_secret output: the secret is ephemeral and stays out of the state. Read it from Secret
# Manager (hmac_secret_id; README.md, "Deploy to GCP").
output "hmac_secret_id" {
  description = "Secret Manager secret holding RELAY_HMAC_KEYS (projects/P/secrets/S): the JSON object {\"<hmac_key_id>\": \"<secret>\"}, whose value for hmac_key_id is the subscription's hmac_secret_key."
  value       = google_secret_manager_secret.hmac.id
}

output "hmac_secret_version" {
  description = "The Secret Manager version holding RELAY_HMAC_KEYS that the service reads (projects/P/secrets/S/versions/N)."
  value       = google_secret_manager_secret_version.hmac.name
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

################################################################################
# Metrics and alerts
################################################################################

output "metric_names" {
  description = "Names of the logs-based metrics (answers, answer_latency, publish_latency, batch_size); in Cloud Monitoring they are logging.googleapis.com/user/<name>."
  value = {
    answers         = google_logging_metric.answers.name
    answer_latency  = google_logging_metric.answer_latency.name
    publish_latency = google_logging_metric.publish_latency.name
    batch_size      = google_logging_metric.batch_size.name
  }
}

output "alert_policy_names" {
  description = "Names (projects/P/alertPolicies/ID) of the alert policies: needs_operator, bad_signature, unavailable, platform_errors, dead_letters (null without dead_letter_subscriptions), undelivered (null without ledger_enabled), verified_refused, metric_lines_dropped and archive_delivery (null without archive_pubsub)."
  value = {
    needs_operator       = google_monitoring_alert_policy.needs_operator.name
    bad_signature        = google_monitoring_alert_policy.bad_signature.name
    unavailable          = google_monitoring_alert_policy.unavailable.name
    platform_errors      = google_monitoring_alert_policy.platform_errors.name
    dead_letters         = one(google_monitoring_alert_policy.dead_letters[*].name)
    undelivered          = one(google_monitoring_alert_policy.undelivered[*].name)
    verified_refused     = google_monitoring_alert_policy.verified_refused.name
    metric_lines_dropped = google_monitoring_alert_policy.metric_lines_dropped.name
    archive_delivery     = one(google_monitoring_alert_policy.archive_delivery[*].name)
  }
}

################################################################################
# Dashboard
################################################################################

output "dashboard_id" {
  description = "The Cloud Monitoring dashboard (projects/<project>/dashboards/<id>); null without dashboard_enabled."
  value       = one(google_monitoring_dashboard.this[*].id)
}

output "dashboard_url" {
  description = "The dashboard in the Google Cloud console (https://console.cloud.google.com/monitoring/dashboards/builder/<id>?project=<project_id>); null without dashboard_enabled."
  value       = var.dashboard_enabled ? "https://console.cloud.google.com/monitoring/dashboards/builder/${basename(one(google_monitoring_dashboard.this[*].id))}?project=${var.project_id}" : null
}

################################################################################
# Live routes and splits
################################################################################

output "routes_url" {
  description = "RELAY_ROUTES_URL, gs://<bucket>/<object>: the stored routes document the relay reads, and the --routes (or RELAY_ROUTES_URL) of `relay routes` and `relay split`; null without routes_enabled."
  value       = local.routes_url
}

output "routes_bucket" {
  description = "The bucket holding the routes document (routes_bucket, or the one created here); null without routes_enabled."
  value       = local.routes_bucket
}

output "stored_sink_allowed" {
  description = "What a stored sink may publish to, comma-separated, for `relay routes put --allowed`: the relay's topic and stored_sink_topics (split topics are granted one by one, by `relay split start --create --grant-to`); null without routes_enabled."
  value       = var.routes_enabled ? join(",", distinct(concat([local.topic_id], var.stored_sink_topics))) : null
}

output "split_prefix" {
  description = "Name prefix of the split topics and subscriptions `relay split start --create` makes in project_id; null without routes_enabled."
  value       = var.routes_enabled ? local.split_prefix : null
}

################################################################################
# Delivery ledger
################################################################################

output "ledger_url" {
  description = "RELAY_LEDGER_URL, firestore://<project>/<database>/<collection>: the delivery ledger the relay writes, and the RELAY_LEDGER_URL of `relay trace BUNDLE_UUID`; null without ledger_enabled."
  value       = local.ledger_url
}

output "ledger_database" {
  description = "Id of the ledger's Firestore database in project_id (created here, or the existing one); null without ledger_enabled."
  value       = local.ledger_create_database ? one(google_firestore_database.ledger[*].name) : local.ledger_database
}

output "ledger_collection" {
  description = "Collection of the ledger's documents in ledger_database; null without ledger_enabled."
  value       = var.ledger_enabled ? var.ledger_collection : null
}

################################################################################
# Archive
################################################################################

output "replay_environment" {
  description = "The RELAY_* variables `relay replay`, `relay trace` and `relay split start --backfill` run with: the relay's own, with its destination, ledger and archive, without its log format and metric lines, and without RELAY_CONFIG (a path in the container). Export them before running the command, with RELAY_ARCHIVE_KEY the latest version of archive_key_secret and, with relay_config, RELAY_CONFIG the path of a copy of relay_config_secret's latest version; a replay verifies nothing, so it needs no HMAC key."
  value = {
    for name, value in local.environment : name => value
    if !contains(["RELAY_LOG_FORMAT", "RELAY_METRICS", "RELAY_CONFIG", "RELAY_ARCHIVE_STREAM"], name)
  }
}

output "archive_url" {
  description = "RELAY_ARCHIVE_URL, gs://<bucket>/<prefix>: the archive the relay writes every verified notification to, and the RELAY_ARCHIVE_URL of `relay replay`; null without archive_enabled."
  value       = local.archive_url
}

output "archive_stream" {
  description = "RELAY_ARCHIVE_STREAM, pubsub://projects/P/topics/T: the topic the relay publishes the archive's records to, which the Cloud Storage subscription archive_subscription writes to the archive; null without archive_pubsub."
  value       = local.archive_stream
}

output "archive_subscription" {
  description = "Name of the Cloud Storage subscription that writes the archive's records from archive_stream to the bucket; null without archive_pubsub."
  value       = local.archive_subscription
}

output "archive_key_secret" {
  description = "Secret Manager secret (projects/P/secrets/S) holding the archive's key (RELAY_ARCHIVE_KEY): the relay seals every record with it, and `relay replay` needs it to open them (archive_readers may read it). null without archive_enabled."
  value       = one(google_secret_manager_secret.archive_key[*].id)
}

output "relay_config_secret" {
  description = "Secret Manager secret (projects/P/secrets/S) holding relay_config, the relay's configuration file, which the container reads as RELAY_CONFIG: a replayer copies its latest version to a file (gcloud secrets versions access latest --secret=…) and sets RELAY_CONFIG to that file (archive_readers may read it). null without relay_config."
  value       = one(google_secret_manager_secret.relay_config[*].id)
}

output "archive_bucket" {
  description = "Name of the archive's Cloud Storage bucket; null without archive_enabled."
  value       = one(google_storage_bucket.archive[*].name)
}
