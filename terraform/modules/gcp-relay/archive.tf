################################################################################
# Archive: every verified notification's record in Cloud Storage (RELAY_ARCHIVE_URL)
################################################################################

# The relay writes every verified notification, filtered ones included, alone as the object
# <archive_prefix>YYYY/MM/DD/HH/<dedup key>, or with the records queued behind a write as the
# lines of one object .../batch-<id> (application/json), with ifGenerationMatch=0: it never
# overwrites an object. Each record is sealed with the archive's key (an HMAC-SHA256,
# RELAY_ARCHIVE_KEY from Secret Manager). On a 412 (the name exists) it reads the object back
# (objects.get) and counts it as written only if it is that notification's sealed record (a
# retry within the same hour); anything else is left alone and the record written beside it. It
# never lists nor deletes the archive. Operators replay from it with `relay replay`, which lists
# an hour's prefix (objects.list), reads its objects (objects.get) and opens them with the
# archive's key, with their own credentials: archive_readers. Objects are deleted after
# archive_retention_days. Grants on the bucket and the key are in iam.tf.
#
# No versioning: nothing overwrites an object (objectCreator cannot: replacing a live object
# needs storage.objects.delete), so there would be no noncurrent version to keep.

locals {
  # The bucket's name, known before the bucket exists; null without the archive. project_id
  # (30), name (24), two hyphens and "archive" make at most 63 characters.
  archive_bucket = !var.archive_enabled ? null : coalesce(var.archive_bucket_name, "${var.project_id}-${var.name}-archive")
  archive_url    = var.archive_enabled ? "gs://${local.archive_bucket}/${var.archive_prefix}" : null

  # The objects under the prefix, as IAM conditions name Cloud Storage objects.
  archive_prefix_condition = var.archive_enabled ? "resource.name.startsWith(\"projects/_/buckets/${local.archive_bucket}/objects/${var.archive_prefix}\")" : null
}

# The archive's key: records are sealed with it, and `relay replay` sends only the records it
# opens. Generated once (ephemeral: never in the plan or the state) and kept for as long as the
# archive: a new key would leave every record written before it unopenable.
ephemeral "random_password" "archive_key" {
  length  = 48
  special = false
}

resource "google_secret_manager_secret" "archive_key" {
  count = var.archive_enabled ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name}-archive-key"
  labels    = var.labels

  replication {
    auto {}
  }
}

# Written once, in a write-only argument: Terraform keeps only the version number in its state.
resource "google_secret_manager_secret_version" "archive_key" {
  count = var.archive_enabled ? 1 : 0

  secret                 = google_secret_manager_secret.archive_key[0].id
  secret_data_wo         = ephemeral.random_password.archive_key.result
  secret_data_wo_version = 1
}

resource "google_storage_bucket" "archive" {
  #checkov:skip=CKV_GCP_62:Only the relay writes and a few operators read; access logs would need a second bucket, and Cloud Audit Logs' data access logs for Cloud Storage record who read or wrote what where that is wanted.
  #checkov:skip=CKV_GCP_78:Nothing overwrites an archived object: the relay creates each name once, with ifGenerationMatch=0, and its role cannot replace or delete one; versioning would keep no second generation.
  count = var.archive_enabled ? 1 : 0

  project                     = var.project_id
  name                        = local.archive_bucket
  location                    = coalesce(var.archive_location, var.region)
  force_destroy               = var.archive_force_destroy
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  dynamic "encryption" {
    for_each = var.archive_kms_key_name != null ? [var.archive_kms_key_name] : []
    content {
      default_kms_key_name = encryption.value
    }
  }

  lifecycle_rule {
    condition {
      age            = var.archive_retention_days
      matches_prefix = [var.archive_prefix]
    }
    action {
      type = "Delete"
    }
  }
}

################################################################################
# The archive through Pub/Sub (archive_pubsub): a topic, and a Cloud Storage subscription
################################################################################

# The relay publishes each sealed record, one line, to the topic (RELAY_ARCHIVE_STREAM) and
# answers once Pub/Sub holds it. The subscription writes the messages it received in text
# format (each message's data and a newline; no attributes) as objects under the prefix, named
# <archive_prefix>YYYY/MM/DD/hh/mm_ss_<id> by the time it started each: `relay replay` lists
# the hours around its window and takes each record by its own receipt time. Pub/Sub's service
# agent writes them: objectCreator on the prefix and legacyBucketReader on the bucket (the
# roles a Cloud Storage subscription needs), nothing else. A message the subscription cannot
# write stays in it for 7 days, and the alert below fires after 30 minutes.
locals {
  archive_pubsub       = var.archive_enabled && var.archive_pubsub
  pubsub_service_agent = one(google_project_service_identity.pubsub[*].member)
  archive_stream       = local.archive_pubsub ? "pubsub://${google_pubsub_topic.archive[0].id}" : null
  archive_subscription = one(google_pubsub_subscription.archive[*].name)
}

# On a fresh project Pub/Sub's service agent may not exist yet, and IAM refuses a binding to a
# member that does not: this has Service Usage create it and waits for it, before the grants.
resource "google_project_service_identity" "pubsub" {
  count    = local.archive_pubsub ? 1 : 0
  provider = google-beta

  project = var.project_id
  service = "pubsub.googleapis.com"
}

resource "google_pubsub_topic" "archive" {
  count = local.archive_pubsub ? 1 : 0

  project      = var.project_id
  name         = "${var.name}-archive"
  kms_key_name = var.topic_kms_key_name
  labels       = var.labels
}

resource "google_storage_bucket_iam_member" "archive_subscription" {
  count = local.archive_pubsub ? 1 : 0

  bucket = google_storage_bucket.archive[0].name
  role   = "roles/storage.objectCreator"
  member = local.pubsub_service_agent

  condition {
    title       = "archive-prefix-only"
    description = "Only objects under the archive prefix of the ${var.name} relay."
    expression  = local.archive_prefix_condition
  }
}

resource "google_storage_bucket_iam_member" "archive_subscription_bucket" {
  count = local.archive_pubsub ? 1 : 0

  bucket = google_storage_bucket.archive[0].name
  role   = "roles/storage.legacyBucketReader"
  member = local.pubsub_service_agent
}

resource "google_pubsub_subscription" "archive" {
  count = local.archive_pubsub ? 1 : 0

  project = var.project_id
  name    = "${var.name}-archive-to-storage"
  topic   = google_pubsub_topic.archive[0].id
  labels  = var.labels

  # An object is written for at most max_duration, which may not exceed the ack deadline.
  ack_deadline_seconds       = var.archive_pubsub_max_duration_secs
  message_retention_duration = "604800s"

  cloud_storage_config {
    bucket                   = google_storage_bucket.archive[0].name
    filename_prefix          = var.archive_prefix
    filename_datetime_format = "YYYY/MM/DD/hh/mm_ss"
    max_duration             = "${var.archive_pubsub_max_duration_secs}s"
    max_bytes                = 5242880
  }

  # The service agent must be able to write before the subscription starts.
  depends_on = [
    google_storage_bucket_iam_member.archive_subscription,
    google_storage_bucket_iam_member.archive_subscription_bucket,
  ]
}
