################################################################################
# Live routes and splits: the stored routes document and its bucket
################################################################################

# The relay reads the document at RELAY_ROUTES_URL at start and again at most every
# RELAY_ROUTES_REFRESH_SECS, with a get conditional on the generation it has
# (ifGenerationNotMatch). route_writers change it with `relay routes` and `relay split`, which
# upload conditional on the generation they read (ifGenerationMatch; 0 when there is no object
# yet), so that two writers never lose each other's change. The module does not create the
# object: a missing object means no stored routes. Grants on the bucket are in iam.tf.

locals {
  create_routes_bucket = var.routes_enabled && var.routes_bucket == null

  # The bucket's name, known before the bucket exists; null without routes.
  routes_bucket = !var.routes_enabled ? null : coalesce(var.routes_bucket, "${var.project_id}-${var.name}-routes")
  routes_url    = var.routes_enabled ? "gs://${local.routes_bucket}/${var.routes_object}" : null

  # The one object the grants reach, as IAM conditions name Cloud Storage objects.
  routes_object_condition = var.routes_enabled ? "resource.name == \"projects/_/buckets/${local.routes_bucket}/objects/${var.routes_object}\"" : null

  split_prefix = coalesce(var.split_prefix, "${var.name}-split-")
}

resource "google_storage_bucket" "routes" {
  #checkov:skip=CKV_GCP_62:The bucket holds one small document that the relay reads and a few developers write; access logs would need a second bucket, and Cloud Audit Logs' data access logs for Cloud Storage record who read or wrote it where that is wanted.
  count = local.create_routes_bucket ? 1 : 0

  project                     = var.project_id
  name                        = local.routes_bucket
  location                    = var.region
  force_destroy               = var.routes_force_destroy
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  # Every write is kept: an earlier document can be restored.
  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      with_state                 = "ARCHIVED"
      days_since_noncurrent_time = var.routes_noncurrent_version_days
    }
    action {
      type = "Delete"
    }
  }
}
