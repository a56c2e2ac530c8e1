################################################################################
# Delivery ledger: one Firestore document per notification (RELAY_LEDGER_URL)
################################################################################

# The relay records, per notification (document id = its ledger key, 64 hex characters), which
# destinations acknowledged it and with which message id, and holds a lease while it publishes,
# so that a retry of the DSS publishes only to the destinations that have not acknowledged and
# an attempt on another instance waits instead of publishing twice. It reads a document
# (documents:batchGet) and writes it with documents:commit conditional on its update time, or on
# its absence; `relay trace BUNDLE_UUID` reads the same collection with documents:runQuery on
# bundle_uuid (a single-field index Firestore keeps by default). The grant is in iam.tf.

locals {
  ledger_create_database = var.ledger_enabled && var.ledger_create_database

  # The database's id, known before it exists; null without the ledger.
  ledger_database = var.ledger_enabled ? var.ledger_database : null
  ledger_url      = var.ledger_enabled ? "firestore://${var.project_id}/${var.ledger_database}/${var.ledger_collection}" : null

  # The one database the relay's grant reaches, as IAM conditions name Firestore databases
  # (projects/P/databases/D). The second half is for checks made on a name below the database:
  # it ends in "/" so that it cannot match another database whose id starts with this one's.
  ledger_database_condition = var.ledger_enabled ? "resource.name == \"projects/${var.project_id}/databases/${var.ledger_database}\" || resource.name.startsWith(\"projects/${var.project_id}/databases/${var.ledger_database}/\")" : null
}

resource "google_firestore_database" "ledger" {
  count = local.ledger_create_database ? 1 : 0

  project          = var.project_id
  name             = var.ledger_database
  location_id      = coalesce(var.ledger_location, var.region)
  type             = "FIRESTORE_NATIVE"
  database_edition = "STANDARD"

  # No App Engine (Datastore API) access: only the relay's REST calls use the database.
  app_engine_integration_mode = "DISABLED"

  point_in_time_recovery_enablement = var.ledger_point_in_time_recovery ? "POINT_IN_TIME_RECOVERY_ENABLED" : "POINT_IN_TIME_RECOVERY_DISABLED"

  # deletion_protection covers the database as it does the service: with it, Firestore refuses
  # to delete the database, so terraform destroy fails; without it, destroy deletes it. The
  # provider's default deletion_policy, ABANDON, would instead drop the database from the state
  # and leave it behind, and a later apply could not create its id again.
  delete_protection_state = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = "DELETE"
}

# The TTL policy: Firestore deletes a document once its expires_at (a timestamp: the last write
# plus RELAY_LEDGER_RETENTION_SECS) has passed, usually within 24 hours; the relay treats a
# document past expires_at as absent meanwhile. The field's automatic single-field indexes are
# turned off (index_config {}): nothing queries expires_at, and an index on an always-increasing
# timestamp is a write hotspot.
resource "google_firestore_field" "ledger_expires_at" {
  count = var.ledger_enabled ? 1 : 0

  project    = var.project_id
  database   = local.ledger_create_database ? google_firestore_database.ledger[0].name : var.ledger_database
  collection = var.ledger_collection
  field      = "expires_at"

  ttl_config {}

  index_config {}
}

# The entry itself, one JSON string per document: read whole, never queried, so it is kept out
# of the automatic single-field indexes (which would cost an index write per document write,
# and cannot index a string past 1,500 bytes anyway).
resource "google_firestore_field" "ledger_state" {
  count = var.ledger_enabled ? 1 : 0

  project    = var.project_id
  database   = local.ledger_create_database ? google_firestore_database.ledger[0].name : var.ledger_database
  collection = var.ledger_collection
  field      = "state"

  index_config {}
}
