# From terraform_data.image, not from the local it was given: whatever reads this output (the
# gcp-relay module's image) waits for the build and the push.
output "image" {
  description = "The pushed relay-gcf image, REGION-docker.pkg.dev/PROJECT/REPOSITORY/relay-gcf:TAG, where TAG is the first 16 hex digits of the sources' hash: the gcp-relay module's image."
  value       = terraform_data.image.output
}

output "repository_id" {
  description = "The Artifact Registry repository holding the image (projects/PROJECT/locations/REGION/repositories/REPOSITORY)."
  value       = google_artifact_registry_repository.this.id
}

output "builder_service_account_email" {
  description = "Email of the service account the builds run as."
  value       = google_service_account.builder.email
}

output "staging_bucket_name" {
  description = "Name of the bucket the sources are uploaded to for each build."
  value       = google_storage_bucket.sources.name
}
