################################################################################
# Delivery ledger: one DynamoDB item per notification (RELAY_LEDGER_URL)
################################################################################

# The relay records, per notification (ledger key = its dedup key, 64 hex characters), which
# destinations acknowledged it and with which message id, and holds a lease while it publishes,
# so that a retry of the DSS publishes only to the destinations that have not acknowledged and
# an attempt on another instance waits instead of publishing twice. It calls UpdateItem (a
# conditional write for each step) and PutItem (resetting an item whose expires_at has passed
# but which TTL has not deleted yet), and nothing else. Items are kept under their bundle (the
# hash key) and found by their ledger key (the range key), with no index: a new notification
# costs two write units, the claim and the settlement. `relay trace BUNDLE_UUID` reads the same
# table with GetItem and a Query on the bundle (ledger_reader_policy_json).
#
# Releases before this layout keyed the table by ledger_key alone, with an index by_bundle: the
# key change replaces the table, which deletion protection refuses. docs/ledger.md, Upgrading,
# moves the entries with `relay ledger migrate`.

locals {
  ledger_table_name = var.ledger_enabled ? coalesce(var.ledger_table_name, "${var.name}-ledger") : null
  ledger_url        = var.ledger_enabled ? "dynamodb://${local.ledger_table_name}" : null
  ledger_table_arn  = one(aws_dynamodb_table.ledger[*].arn)
}

resource "aws_dynamodb_table" "ledger" {
  count = var.ledger_enabled ? 1 : 0

  name         = local.ledger_table_name
  billing_mode = "PAY_PER_REQUEST"
  # `relay trace BUNDLE_UUID` is a Query on the hash key: no index, so no index writes.
  hash_key  = "bundle_uuid"
  range_key = "ledger_key"

  # Only key attributes are declared; every other attribute of an item (acknowledgements,
  # leases, attempts) is schemaless.
  attribute {
    name = "bundle_uuid"
    type = "S"
  }

  attribute {
    name = "ledger_key"
    type = "S"
  }

  # expires_at holds epoch seconds: the last write plus RELAY_LEDGER_RETENTION_SECS. DynamoDB
  # deletes an expired item within days, at no cost; the relay treats an item past expires_at
  # as absent meanwhile.
  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  # kms_key_arn, or the AWS managed key aws/dynamodb. The role's UseCustomerManagedKeys
  # statement covers the customer-managed key.
  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  point_in_time_recovery {
    enabled = var.ledger_point_in_time_recovery
  }

  # DynamoDB refuses to delete the table while this is on: terraform destroy, and a change that
  # replaces the table, fail until ledger_deletion_protection = false has been applied.
  deletion_protection_enabled = var.ledger_deletion_protection

  tags = var.tags
}

################################################################################
# What `relay trace` needs (output ledger_reader_policy_json)
################################################################################

# An identity policy for whoever runs `relay trace` against this table: one record by its
# bundle and ledger key, and a bundle's records by a Query on the table.
data "aws_iam_policy_document" "ledger_readers" {
  count = var.ledger_enabled ? 1 : 0

  statement {
    sid       = "ReadLedgerRecords"
    effect    = "Allow"
    actions   = ["dynamodb:GetItem", "dynamodb:Query"]
    resources = [local.ledger_table_arn]
  }

  # With kms_key_arn, reading the table needs Decrypt with that key.
  dynamic "statement" {
    for_each = var.kms_key_arn != null ? [var.kms_key_arn] : []
    content {
      sid       = "UseLedgerKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
    }
  }
}
