locals {
  # The repository root: the checkout that is uploaded to Cloud Build.
  source_dir = abspath(coalesce(var.source_dir, "${path.module}/../../.."))

  # What goes into the image (infra/docker/Dockerfile builds relay-gcf from the workspace), plus
  # the build configuration. A change to any of these files changes the tag, and so builds and
  # deploys a new image; a change anywhere else (docs, Terraform, tests) does not.
  # rust-toolchain.toml matches nothing when it is absent.
  source_patterns = [
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain.toml",
    "crates/**",
    "infra/docker/**",
    "infra/gcp/cloudbuild.yaml",
  ]
  source_files = sort(distinct(flatten([
    for pattern in local.source_patterns : tolist(fileset(local.source_dir, pattern))
  ])))
  # Each file's path and content hash, so that a rename changes the hash too.
  source_hash = sha1(join("\n", [
    for file in local.source_files : "${file} ${filesha1("${local.source_dir}/${file}")}"
  ]))

  repository_id = coalesce(var.repository_id, var.name)

  # Read from the repository's own attributes, so that the build waits for the repository.
  image = format(
    "%s-docker.pkg.dev/%s/%s/relay-gcf:%s",
    google_artifact_registry_repository.this.location,
    google_artifact_registry_repository.this.project,
    google_artifact_registry_repository.this.repository_id,
    substr(local.source_hash, 0, 16),
  )
}

################################################################################
# Artifact Registry repository
################################################################################

resource "google_artifact_registry_repository" "this" {
  #checkov:skip=CKV_GCP_84:The repository holds only the relay-gcf image, built from public sources and holding no secret (the HMAC key is in Secret Manager); Google-managed encryption applies, and a customer-managed key would add a key ring and grants to every deployment.
  project       = var.project_id
  location      = var.region
  repository_id = local.repository_id
  format        = "DOCKER"
  description   = "relay-gcf images for the ${var.name} relay, built by Cloud Build from the repository's sources."
  labels        = var.labels

  # Every source change pushes a new tag. Keep the newest keep_recent_images versions whatever
  # their age (the running revision's image among them), delete the others after 30 days.
  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.keep_recent_images
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "2592000s"
    }
  }
}

################################################################################
# Staging bucket for the uploaded sources
################################################################################

# `gcloud builds submit` packs the checkout (less .gcloudignore) into a tarball and uploads it
# here; Cloud Build reads it as the builder service account. The tarballs are only read at the
# start of a build, so they are deleted after staging_retention_days.
resource "google_storage_bucket" "sources" {
  #checkov:skip=CKV_GCP_62:The bucket holds only build-source tarballs of public code for a few days; access logs would need a second bucket, and Cloud Build's own records say which build read which tarball.
  #checkov:skip=CKV_GCP_78:Versioning would keep copies of transient build sources that the lifecycle rule is there to delete; every tarball has a unique name and is never overwritten.
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name}-build"
  location                    = var.region
  force_destroy               = true
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  lifecycle_rule {
    condition {
      age = var.staging_retention_days
    }
    action {
      type = "Delete"
    }
  }

  # Nothing here is worth recovering: a deleted tarball is uploaded again by the next build.
  soft_delete_policy {
    retention_duration_seconds = 0
  }
}

################################################################################
# The build: Cloud Build, from this checkout, when the sources change
################################################################################

# Runs on the machine that runs `terraform apply`: it needs the gcloud CLI on PATH, signed in
# with `gcloud auth login` (gcloud uses its own credentials, not the application-default ones
# of the google provider). That identity uploads the sources and starts the build, which runs
# as the builder service account (iam.tf). No Docker engine is needed on that machine.
#
# The resource is replaced, and the build runs again, whenever the image reference changes:
# when a source file changes (the tag is the first 16 hex digits of the sources' hash), or the
# project, region or repository does. The Cloud Run service reads the image through the
# `image` output, from this resource, so it is updated only after the push.
#
# An image already in the repository under the same tag (the same sources) is not built again.
resource "terraform_data" "image" {
  input            = local.image
  triggers_replace = [local.image]

  provisioner "local-exec" {
    environment = {
      CLOUDSDK_CORE_DISABLE_PROMPTS = "1"
      BUILD_PROJECT                 = var.project_id
      BUILD_REGION                  = var.region
      BUILD_IMAGE                   = local.image
      BUILD_SOURCE_DIR              = local.source_dir
      BUILD_SERVICE_ACCOUNT         = "projects/${var.project_id}/serviceAccounts/${google_service_account.builder.email}"
      BUILD_STAGING_DIR             = "gs://${google_storage_bucket.sources.name}/source"
    }
    command = <<-EOT
      set -eu
      if ! command -v gcloud >/dev/null 2>&1; then
        echo "gcp-relay-image: the gcloud CLI is not on PATH. Install the Google Cloud CLI and run 'gcloud auth login', or build the image elsewhere and pass it as image." >&2
        exit 1
      fi
      if gcloud artifacts docker images describe "$BUILD_IMAGE" --project="$BUILD_PROJECT" >/dev/null 2>&1; then
        echo "gcp-relay-image: $BUILD_IMAGE is already in the repository; not building it again."
        exit 0
      fi
      echo "gcp-relay-image: building $BUILD_IMAGE with Cloud Build from $BUILD_SOURCE_DIR (about 10 minutes; the build log is in Cloud Logging)"
      gcloud builds submit "$BUILD_SOURCE_DIR" \
        --project="$BUILD_PROJECT" \
        --region="$BUILD_REGION" \
        --config="$BUILD_SOURCE_DIR/infra/gcp/cloudbuild.yaml" \
        --substitutions="_IMAGE=$BUILD_IMAGE" \
        --service-account="$BUILD_SERVICE_ACCOUNT" \
        --gcs-source-staging-dir="$BUILD_STAGING_DIR"
    EOT
  }

  lifecycle {
    precondition {
      condition     = fileexists("${local.source_dir}/infra/gcp/cloudbuild.yaml") && fileexists("${local.source_dir}/infra/docker/Dockerfile")
      error_message = "source_dir must be the root of a checkout of this repository (it has infra/gcp/cloudbuild.yaml and infra/docker/Dockerfile)."
    }
  }

  # The builder must be able to read the sources, write its logs and push before it starts.
  depends_on = [time_sleep.grants]
}
