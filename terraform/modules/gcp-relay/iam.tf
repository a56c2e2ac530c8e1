################################################################################
# Service account: reads its own secrets and routes document, publishes to its one topic, reads
# and writes its ledger, and creates archive objects
################################################################################

resource "google_service_account" "this" {
  project      = var.project_id
  account_id   = "relay-${var.name}"
  display_name = "DSS relay ${var.name}"
  description  = "Runs the ${var.name} Cloud Run relay: reads its HMAC secret (and its stored routes document), publishes to its topic, reads and writes its delivery ledger and creates objects in its archive, nothing else."
}

resource "google_secret_manager_secret_iam_member" "relay" {
  project   = var.project_id
  secret_id = google_secret_manager_secret.hmac.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.this.email}"
}

################################################################################
# Configuration file (config.tf): the relay reads it, and so do archive_readers; the sources'
# secrets, the relay only
################################################################################

resource "google_secret_manager_secret_iam_member" "relay_config" {
  count = local.relay_config_enabled ? 1 : 0

  project   = var.project_id
  secret_id = google_secret_manager_secret.relay_config[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.this.email}"
}

# `relay replay` routes by the relay's configuration file: the readers fetch it
# (relay_config_secret) and point RELAY_CONFIG at their copy.
resource "google_secret_manager_secret_iam_member" "archive_readers_config" {
  for_each = toset(var.archive_enabled && local.relay_config_enabled ? var.archive_readers : [])

  project   = var.project_id
  secret_id = google_secret_manager_secret.relay_config[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = each.value
}

# Exactly the secrets of source_secret_ids, each an id in project_id or a full name
# (projects/P/secrets/S, in project P). A replay verifies nothing, so archive_readers need none
# of them.
resource "google_secret_manager_secret_iam_member" "source_secrets" {
  for_each = var.source_secret_ids

  project   = startswith(each.value, "projects/") ? split("/", each.value)[1] : var.project_id
  secret_id = startswith(each.value, "projects/") ? split("/", each.value)[3] : each.value
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
# Live routes (routes.tf): the one routes object, read by the relay, written by route_writers
################################################################################

# Both grants are on the bucket, with an IAM condition that limits them to the routes object:
# Cloud Storage names an object projects/_/buckets/<bucket>/objects/<object> in conditions, and
# conditions need uniform bucket-level access on the bucket.

# Reading the document (storage.objects.get). A missing object is a 404 (no stored routes).
resource "google_storage_bucket_iam_member" "relay_routes" {
  count = var.routes_enabled ? 1 : 0

  bucket = var.routes_bucket != null ? var.routes_bucket : google_storage_bucket.routes[0].name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.this.email}"

  condition {
    title       = "routes-document-only"
    description = "Only the stored routes document of the ${var.name} relay."
    expression  = local.routes_object_condition
  }
}

# Writing it with a generation precondition: creating the object needs storage.objects.create;
# replacing it also storage.objects.delete (Cloud Storage asks both of an upload over a live
# object); reading the generation to compare, storage.objects.get. roles/storage.objectUser is the smallest
# predefined role with all three (objectCreator has neither get nor delete; objectAdmin adds
# object IAM and retention on top).
resource "google_storage_bucket_iam_member" "route_writers" {
  for_each = toset(var.routes_enabled ? var.route_writers : [])

  bucket = var.routes_bucket != null ? var.routes_bucket : google_storage_bucket.routes[0].name
  role   = "roles/storage.objectUser"
  member = each.value

  condition {
    title       = "routes-document-only"
    description = "Only the stored routes document of the ${var.name} relay."
    expression  = local.routes_object_condition
  }
}

################################################################################
# Archive (archive.tf): the relay creates objects under the prefix, archive_readers read them
################################################################################

# Creating objects (storage.objects.create): roles/storage.objectCreator has no get, no list
# and no delete, and replacing a live object needs delete, so the relay cannot overwrite or
# remove what it archived. The condition keeps it to the archive's prefix.
resource "google_storage_bucket_iam_member" "relay_archive" {
  count = var.archive_enabled ? 1 : 0

  bucket = google_storage_bucket.archive[0].name
  role   = "roles/storage.objectCreator"
  member = "serviceAccount:${google_service_account.this.email}"

  condition {
    title       = "archive-prefix-only"
    description = "Only objects under the archive prefix of the ${var.name} relay."
    expression  = local.archive_prefix_condition
  }
}

# With archive_pubsub, the relay publishes the archive's records to its topic, and only there.
resource "google_pubsub_topic_iam_member" "relay_archive_stream" {
  count = local.archive_pubsub ? 1 : 0

  project = var.project_id
  topic   = google_pubsub_topic.archive[0].name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.this.email}"
}

# After a 412 the relay reads the object at the name back (objects.get), to count it as written
# only if it is the notification's sealed record: roles/storage.objectViewer, on the prefix only
# (its objects.list is checked on the bucket's name, so the condition leaves the relay no list).
resource "google_storage_bucket_iam_member" "relay_archive_read" {
  count = var.archive_enabled ? 1 : 0

  bucket = google_storage_bucket.archive[0].name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.this.email}"

  condition {
    title       = "archive-prefix-only"
    description = "Only objects under the archive prefix of the ${var.name} relay."
    expression  = local.archive_prefix_condition
  }
}

# The archive's key (RELAY_ARCHIVE_KEY): the relay seals records with it; archive_readers open
# them with it in `relay replay`.
resource "google_secret_manager_secret_iam_member" "relay_archive_key" {
  count = var.archive_enabled ? 1 : 0

  project   = var.project_id
  secret_id = google_secret_manager_secret.archive_key[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.this.email}"
}

resource "google_secret_manager_secret_iam_member" "archive_readers_key" {
  for_each = toset(var.archive_enabled ? var.archive_readers : [])

  project   = var.project_id
  secret_id = google_secret_manager_secret.archive_key[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = each.value
}

# `relay replay`: objects.list by hour prefix and objects.get, roles/storage.objectViewer. No
# condition: a list is checked on the bucket's name, which a prefix condition would refuse.
resource "google_storage_bucket_iam_member" "archive_readers" {
  for_each = toset(var.archive_enabled ? var.archive_readers : [])

  bucket = google_storage_bucket.archive[0].name
  role   = "roles/storage.objectViewer"
  member = each.value
}

# `relay replay` publishes to the relay's own topic, as the relay does: with create_topic, the
# topic created here (an existing topic's owner grants it, as gcp-topic-grant does the relay's).
resource "google_pubsub_topic_iam_member" "archive_readers" {
  for_each = toset(var.archive_enabled && var.create_topic ? var.archive_readers : [])

  project = var.project_id
  topic   = google_pubsub_topic.this[0].name
  role    = "roles/pubsub.publisher"
  member  = each.value
}

################################################################################
# Delivery ledger (ledger.tf): the one Firestore database
################################################################################

# A custom role with exactly what the relay's ledger calls (crates/relay-core/src/ledger/
# firestore.rs): documents:batchGet reads a document (datastore.entities.get); documents:commit
# writes one with a precondition, exists: false to create it (datastore.entities.create) or
# updateTime to replace it (datastore.entities.update). It runs no query, no transaction and no
# delete (the TTL policy deletes), and administers nothing; roles/datastore.user, the narrowest
# predefined role, would add list, delete, allocateIds, transactions and index reads. Creating
# the role needs iam.roles.create on project_id (roles/iam.roleAdmin). role_id takes no hyphens.
resource "google_project_iam_custom_role" "ledger" {
  count = var.ledger_enabled ? 1 : 0

  project     = var.project_id
  role_id     = "dssRelayLedger_${replace(var.name, "-", "_")}"
  title       = "DSS relay ${var.name}: delivery ledger"
  description = "What the ${var.name} relay calls on its Firestore delivery ledger: read, create and update documents."
  permissions = ["datastore.entities.create", "datastore.entities.get", "datastore.entities.update"]
}

# Firestore has no IAM policy of its own on a database, so the grant is made on the project,
# with an IAM condition on resource.name that limits it to the ledger's database: Firestore
# evaluates conditions on its databases' names (projects/P/databases/D), which is how
# per-database access is granted. Making it needs resourcemanager.projects.setIamPolicy on
# project_id.
resource "google_project_iam_member" "relay_ledger" {
  count = var.ledger_enabled ? 1 : 0

  project = var.project_id
  role    = google_project_iam_custom_role.ledger[0].name
  member  = "serviceAccount:${google_service_account.this.email}"

  condition {
    title       = "ledger-database-only"
    description = "Only the delivery ledger database of the ${var.name} relay."
    expression  = local.ledger_database_condition
  }

  # A change of role (roles/datastore.user before the custom role) replaces the binding: the new
  # one first, so that the relay never runs without access to its ledger.
  lifecycle {
    create_before_destroy = true
  }
}

# Stored sinks ([sinks.<name>] of the routes document) publish to the topics the operator names
# in stored_sink_topics: the same role, on exactly each of those topics.
resource "google_pubsub_topic_iam_member" "stored_sinks" {
  for_each = toset(var.routes_enabled ? var.stored_sink_topics : [])

  topic  = each.value
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${google_service_account.this.email}"
}

# No grant on split topics. Pub/Sub takes no IAM condition on resource names (its bindings
# accept none, and pubsub.googleapis.com is not among the services that read resource.name in a
# condition), so "topics whose name starts with split_prefix" cannot be granted ahead of time.
# `relay split start --create --grant-to` grants roles/pubsub.publisher on each topic it makes to
# this service account, and deleting the topic removes the grant.

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
