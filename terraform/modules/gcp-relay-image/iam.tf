################################################################################
# Builder service account: reads the staged sources, writes its logs, pushes the image
################################################################################

resource "google_service_account" "builder" {
  project      = var.project_id
  account_id   = "build-${var.name}"
  display_name = "DSS relay ${var.name} image builder"
  description  = "Runs the Cloud Build builds of the ${var.name} relay's image: reads the staged sources, writes the build log, pushes to one repository, nothing else."
}

resource "google_artifact_registry_repository_iam_member" "builder_writer" {
  project    = google_artifact_registry_repository.this.project
  location   = google_artifact_registry_repository.this.location
  repository = google_artifact_registry_repository.this.name
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.builder.email}"
}

resource "google_storage_bucket_iam_member" "builder_sources" {
  bucket = google_storage_bucket.sources.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.builder.email}"
}

# The one grant on the project, because there is no smaller resource to grant it on: Cloud
# Logging takes log writes on the project as a whole (logging.logEntries.create is granted on a
# project, folder or organization, not on a log or a log bucket). A build that runs as a
# user-specified service account must send its log to Cloud Logging (infra/gcp/cloudbuild.yaml
# sets CLOUD_LOGGING_ONLY) or to a bucket of its own, and Cloud Build needs this role for it.
# roles/logging.logWriter only writes log entries: the account can read none.
resource "google_project_iam_member" "builder_log_writer" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = "serviceAccount:${google_service_account.builder.email}"
}

# IAM grants take a while to reach every Google service. Without this pause the first build,
# which starts seconds after the grants, can be refused the staged sources or its log. Only a
# new grant waits; later builds start at once.
resource "time_sleep" "grants" {
  create_duration = "60s"

  triggers = {
    writer     = google_artifact_registry_repository_iam_member.builder_writer.id
    sources    = google_storage_bucket_iam_member.builder_sources.id
    log_writer = google_project_iam_member.builder_log_writer.id
  }
}
