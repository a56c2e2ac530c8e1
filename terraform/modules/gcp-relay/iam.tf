################################################################################
# Service account: reads its own secret, publishes to its one topic
################################################################################

resource "google_service_account" "this" {
  project      = var.project_id
  account_id   = "relay-${var.name}"
  display_name = "DSS relay ${var.name}"
  description  = "Runs the ${var.name} Cloud Run relay: reads its HMAC secret and publishes to its topic, nothing else."
}

resource "google_secret_manager_secret_iam_member" "relay" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.hmac.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.this.email}"
}

# Only on the topic created here. An existing topic's owner grants the same role on that one
# topic with the gcp-topic-grant module.
resource "google_pubsub_topic_iam_member" "relay" {
  count = var.create_topic ? 1 : 0

  project = var.project_id
  topic   = google_pubsub_topic.this[0].name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.this.email}"
}

################################################################################
# Public invocation: on purpose
################################################################################

# The DSS signs each request with draft-cavage HMAC in the Authorization header and cannot present
# a Google identity token there, so the service allows unauthenticated invocation and the relay
# verifies the HMAC signature itself (401 otherwise) before publishing anything.
#
# public_invocation chooses how: "allusers_binding" (this grant) or "invoker_iam_disabled"
# (invoker_iam_disabled on the service, no grant). An organisation that enforces domain-restricted
# sharing (iam.allowedPolicyMemberDomains) refuses an allUsers member, so there this grant fails
# to apply and only "invoker_iam_disabled" works.
# (checkov 3.3.30's CKV_GCP_102 checks only the v1 google_cloud_run_service_iam_* resources, so
# nothing is skipped here; a checkov that checks v2 will want a skip with this reason.)
resource "google_cloud_run_v2_service_iam_member" "public" {
  count = var.public_invocation == "allusers_binding" ? 1 : 0

  project  = google_cloud_run_v2_service.this.project
  location = google_cloud_run_v2_service.this.location
  name     = google_cloud_run_v2_service.this.name
  role     = "roles/run.invoker"
  member   = "allUsers"
}
