################################################################################
# Archive: every verified notification's record in S3 (RELAY_ARCHIVE_URL), through Amazon Data
# Firehose by default (RELAY_ARCHIVE_STREAM)
################################################################################

# The relay writes every verified notification's record, filtered ones included, sealed with the
# archive's key (an HMAC-SHA256, RELAY_ARCHIVE_KEY_SECRET_ARN). With archive_firehose (the
# default) it hands each record to a delivery stream created here (PutRecord, PutRecordBatch) and
# answers once Firehose holds it; Firehose buffers the records and writes them as objects
# <archive_prefix>YYYY/MM/DD/HH/<stream>-… (one record per line, the hour in which it received
# them), a few per buffering interval rather than one PutObject per notification. A record
# larger than Firehose takes (1,000 KiB), and every record without archive_firehose, is an object
# the relay writes itself: <archive_prefix>YYYY/MM/DD/HH/<dedup key> alone, or the lines of
# .../batch-<id> for records queued together, with PutObject and If-None-Match: * (it never
# overwrites an object). On a 412 it reads the object back (GetObject) and counts it as written
# only if it is that notification's sealed record; anything else is left alone and the record
# written beside it. It never lists nor deletes the archive. Operators replay from it with
# `relay replay`, which lists an hour's prefix (ListObjectsV2), reads its objects (GetObject)
# and opens each line with the archive's key, with their own credentials: archive_readers,
# through the bucket policy and archive_reader_policy_json. Objects expire after
# archive_retention_days.
#
# No versioning: nothing overwrites an object (the bucket policy refuses the role's PutObject
# without If-None-Match, and Firehose names each object anew), so there would be no noncurrent
# version to keep.

locals {
  # S3 bucket names are lowercase letters, digits and hyphens; var.name may hold capitals and
  # underscores. 27 characters of it, "-archive-" (9), the account id (12), "-" and the longest
  # region name (14) make 63, the most S3 takes.
  archive_bucket_base = trim(substr(coalesce(trim(replace(lower(var.name), "/[^a-z0-9-]/", "-"), "-"), "relay"), 0, 27), "-")

  # The bucket's name, known before the bucket exists; null without the archive.
  archive_bucket = !var.archive_enabled ? null : coalesce(var.archive_bucket_name, "${local.archive_bucket_base}-archive-${local.account_id}-${local.region}")
  archive_url    = var.archive_enabled ? "s3://${local.archive_bucket}/${var.archive_prefix}" : null

  archive_bucket_arn  = var.archive_enabled ? "arn:${local.partition}:s3:::${local.archive_bucket}" : null
  archive_objects_arn = var.archive_enabled ? "${local.archive_bucket_arn}/${var.archive_prefix}*" : null

  # RELAY_ARCHIVE_STREAM: the delivery stream the records go through; null without it.
  archive_firehose   = var.archive_enabled && var.archive_firehose
  archive_stream     = local.archive_firehose ? "${var.name}-archive" : null
  archive_stream_arn = local.archive_firehose ? "arn:${local.partition}:firehose:${local.region}:${local.account_id}:deliverystream/${local.archive_stream}" : null
}

################################################################################
# The delivery stream (archive_firehose): records in, objects by hour out
################################################################################

# Firehose assumes this role to write the archive's objects, for this account's stream only.
data "aws_iam_policy_document" "archive_delivery_trust" {
  count = local.archive_firehose ? 1 : 0

  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["firehose.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "sts:ExternalId"
      values   = [local.account_id]
    }
  }
}

# What Firehose needs to deliver to S3, and no more: create objects under the prefix (and abort
# an upload it left), find the bucket's region, list its own unfinished uploads; with
# archive_kms_key_arn, encrypt through S3.
data "aws_iam_policy_document" "archive_delivery" {
  count = local.archive_firehose ? 1 : 0

  statement {
    sid       = "DeliverArchiveObjects"
    actions   = ["s3:PutObject", "s3:AbortMultipartUpload"]
    resources = [local.archive_objects_arn]
  }

  statement {
    sid       = "FindArchiveBucket"
    actions   = ["s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]
    resources = [local.archive_bucket_arn]
  }

  # Its delivery errors, in the relay's log group (stream archive-delivery).
  statement {
    sid       = "LogArchiveDelivery"
    actions   = ["logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.this.arn}:log-stream:archive-delivery"]
  }

  dynamic "statement" {
    for_each = var.archive_kms_key_arn != null ? [var.archive_kms_key_arn] : []
    content {
      sid       = "EncryptArchiveObjects"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${local.region}.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_role" "archive_delivery" {
  count = local.archive_firehose ? 1 : 0

  name_prefix          = "${substr(var.name, 0, 20)}-archive-"
  path                 = var.role_path
  permissions_boundary = var.permissions_boundary_arn
  assume_role_policy   = data.aws_iam_policy_document.archive_delivery_trust[0].json
  tags                 = var.tags
}

resource "aws_iam_role_policy" "archive_delivery" {
  count = local.archive_firehose ? 1 : 0

  name   = "deliver-archive"
  role   = aws_iam_role.archive_delivery[0].id
  policy = data.aws_iam_policy_document.archive_delivery[0].json
}

resource "aws_cloudwatch_log_stream" "archive_delivery" {
  count = local.archive_firehose ? 1 : 0

  name           = "archive-delivery"
  log_group_name = aws_cloudwatch_log_group.this.name
}

resource "aws_kinesis_firehose_delivery_stream" "archive" {
  count = local.archive_firehose ? 1 : 0

  name        = local.archive_stream
  destination = "extended_s3"

  # Records at rest in the stream's buffer, with the module's key when given.
  server_side_encryption {
    enabled  = true
    key_type = var.kms_key_arn == null ? "AWS_OWNED_CMK" : "CUSTOMER_MANAGED_CMK"
    key_arn  = var.kms_key_arn
  }

  extended_s3_configuration {
    role_arn   = aws_iam_role.archive_delivery[0].arn
    bucket_arn = local.archive_bucket_arn
    # Firehose adds YYYY/MM/DD/HH/ (UTC) after the prefix: the archive's hours.
    prefix             = var.archive_prefix
    buffering_size     = 5
    buffering_interval = var.archive_firehose_buffer_seconds
    # relay replay reads the lines as they are.
    compression_format = "UNCOMPRESSED"

    cloudwatch_logging_options {
      enabled         = true
      log_group_name  = aws_cloudwatch_log_group.this.name
      log_stream_name = aws_cloudwatch_log_stream.archive_delivery[0].name
    }
  }

  tags = var.tags

  # The bucket and the role's grant before the first delivery.
  depends_on = [aws_s3_bucket.archive, aws_iam_role_policy.archive_delivery]
}

# The archive's key: records are sealed with it, and `relay replay` sends only the records it
# opens. Generated once (ephemeral: never in the plan or the state) and kept for as long as the
# archive: a new key would leave every record written before it unopenable.
ephemeral "random_password" "archive_key" {
  length  = 48
  special = false
}

resource "aws_secretsmanager_secret" "archive_key" {
  #checkov:skip=CKV2_AWS_57:Records are sealed with this key for as long as they are kept; a rotated key would leave every earlier record unopenable by relay replay.
  count = var.archive_enabled ? 1 : 0

  name_prefix             = "${var.name}-archive-key-"
  description             = "RELAY_ARCHIVE_KEY of the ${var.name} relay: the key its archive records are sealed with, read once at start and by relay replay."
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = var.tags
}

# Written once, in a write-only argument: Terraform keeps only the version number in its state.
resource "aws_secretsmanager_secret_version" "archive_key" {
  count = var.archive_enabled ? 1 : 0

  secret_id                = aws_secretsmanager_secret.archive_key[0].id
  secret_string_wo         = ephemeral.random_password.archive_key.result
  secret_string_wo_version = 1
}

resource "aws_s3_bucket" "archive" {
  #checkov:skip=CKV_AWS_18:Only the relay writes and a few operators read; server access logs would need a second bucket, and CloudTrail data events on this bucket record who read or wrote what where that is wanted.
  #checkov:skip=CKV_AWS_144:The archive serves replays in this region; a replica in another region would serve no reader, and its objects expire after archive_retention_days.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to a write: `relay replay` lists the hours it replays, so event notifications would have no consumer.
  #checkov:skip=CKV_AWS_21:Nothing overwrites an archived object: the relay writes each key once, with If-None-Match: *, and the bucket policy refuses its PutObject without it; versioning would keep no second version.
  count = var.archive_enabled ? 1 : 0

  bucket        = local.archive_bucket
  force_destroy = var.archive_force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_server_side_encryption_configuration" "archive" {
  count = var.archive_enabled ? 1 : 0

  bucket = aws_s3_bucket.archive[0].id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.archive_kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.archive_kms_key_arn
    }
    # With SSE-KMS, one data key per bucket for a while instead of a KMS call per object.
    bucket_key_enabled = var.archive_kms_key_arn != null
  }
}

resource "aws_s3_bucket_public_access_block" "archive" {
  count = var.archive_enabled ? 1 : 0

  bucket                  = aws_s3_bucket.archive[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# No ACLs: the bucket owner owns every object.
resource "aws_s3_bucket_ownership_controls" "archive" {
  count = var.archive_enabled ? 1 : 0

  bucket = aws_s3_bucket.archive[0].id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "archive" {
  count = var.archive_enabled ? 1 : 0

  bucket = aws_s3_bucket.archive[0].id

  rule {
    id     = "expire-archived-notifications"
    status = "Enabled"

    filter {
      prefix = var.archive_prefix
    }

    expiration {
      days = var.archive_retention_days
    }
  }

  # The relay uploads with single PutObjects; anything else half-uploaded goes after a day.
  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"

    filter {}

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

# TLS (1.2 or later) only, for everyone; the relay's role only creates objects (PutObject without
# If-None-Match is refused, so it cannot overwrite one); archive_readers read and list the
# prefix. This policy is what lets readers in another account in.
data "aws_iam_policy_document" "archive_bucket" {
  count = var.archive_enabled ? 1 : 0

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.archive[0].arn, "${aws_s3_bucket.archive[0].arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }

  # And TLS 1.2 or later: older versions are refused even over TLS.
  statement {
    sid       = "DenyOutdatedTls"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.archive[0].arn, "${aws_s3_bucket.archive[0].arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "NumericLessThan"
      variable = "s3:TlsVersion"
      values   = ["1.2"]
    }
  }

  statement {
    sid       = "DenyRelayOverwrite"
    effect    = "Deny"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.archive[0].arn}/*"]

    principals {
      type        = "AWS"
      identifiers = [local.role_arn]
    }

    condition {
      test     = "Null"
      variable = "s3:if-none-match"
      values   = ["true"]
    }
  }

  dynamic "statement" {
    for_each = length(var.archive_readers) > 0 ? [var.archive_readers] : []
    content {
      sid       = "ArchiveReadersReadNotifications"
      effect    = "Allow"
      actions   = ["s3:GetObject"]
      resources = ["${aws_s3_bucket.archive[0].arn}/${var.archive_prefix}*"]

      principals {
        type        = "AWS"
        identifiers = statement.value
      }
    }
  }

  dynamic "statement" {
    for_each = length(var.archive_readers) > 0 ? [var.archive_readers] : []
    content {
      sid       = "ArchiveReadersListNotifications"
      effect    = "Allow"
      actions   = ["s3:ListBucket"]
      resources = [aws_s3_bucket.archive[0].arn]

      principals {
        type        = "AWS"
        identifiers = statement.value
      }

      condition {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = ["${var.archive_prefix}*"]
      }
    }
  }
}

resource "aws_s3_bucket_policy" "archive" {
  count = var.archive_enabled ? 1 : 0

  bucket = aws_s3_bucket.archive[0].id
  policy = data.aws_iam_policy_document.archive_bucket[0].json

  # S3 refuses a policy while the public access block is being put in place.
  depends_on = [aws_s3_bucket_public_access_block.archive]
}

################################################################################
# What `relay replay` needs (output archive_reader_policy_json)
################################################################################

# An identity policy for whoever runs `relay replay`: list an hour's prefix and read its
# objects; with the ledger, what `relay trace` reads (ledger_readers, GetItem and Query on the
# table) and the ledger writes a replay records its deliveries with (UpdateItem, PutItem).
# With stored routes, a replay reads the routes document and sends to what it names beyond the
# relay's own destination (the splits' queues and topics, the stored sinks): the role's own
# statements for those, taken from its document, so that the two never differ.
locals {
  replay_route_sids = [
    "ReadStoredRoutes", "FindStoredRoutes", "SendToSplitQueues", "PublishToSplitTopics",
    "SendToStoredSinkQueues", "PublishToStoredSinkTopics",
  ]
  replay_route_statements = [
    for s in jsondecode(data.aws_iam_policy_document.this.json).Statement : s
    if contains(local.replay_route_sids, try(s.Sid, ""))
  ]
}

data "aws_iam_policy_document" "archive_readers" {
  count = var.archive_enabled ? 1 : 0

  source_policy_documents = concat(
    data.aws_iam_policy_document.ledger_readers[*].json,
    length(local.replay_route_statements) > 0 ? [jsonencode({ Version = "2012-10-17", Statement = local.replay_route_statements })] : [],
  )

  statement {
    sid       = "ListArchive"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [local.archive_bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${var.archive_prefix}*"]
    }
  }

  statement {
    sid       = "ReadArchive"
    effect    = "Allow"
    actions   = ["s3:GetObject"]
    resources = [local.archive_objects_arn]
  }

  # The archive's key, to open the records (RELAY_ARCHIVE_KEY_SECRET_ARN).
  statement {
    sid       = "ReadArchiveKey"
    effect    = "Allow"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = aws_secretsmanager_secret.archive_key[*].arn
  }

  # The relay's configuration file (RELAY_CONFIG in replay_environment): a replay reads it as
  # the relay does, for its routes and sinks.
  dynamic "statement" {
    for_each = var.relay_config != null ? [aws_secretsmanager_secret.relay_config[0].arn] : []
    content {
      sid       = "ReadRelayConfig"
      effect    = "Allow"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [statement.value]
    }
  }

  # Both secrets are encrypted with kms_key_arn when it is set.
  dynamic "statement" {
    for_each = var.kms_key_arn != null ? [var.kms_key_arn] : []
    content {
      sid       = "DecryptArchiveKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = var.archive_kms_key_arn != null ? [var.archive_kms_key_arn] : []
    content {
      sid       = "DecryptArchive"
      effect    = "Allow"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
    }
  }

  # A replay publishes to the relay's own destination, as the relay does (a split's or a stored
  # sink's destination needs that destination's own grant).
  dynamic "statement" {
    for_each = local.sqs_enabled ? [local.queue_arn] : []
    content {
      sid       = "ReplayToQueue"
      effect    = "Allow"
      actions   = ["sqs:SendMessage"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = local.sns_enabled ? [var.sns_topic_arn] : []
    content {
      sid       = "ReplayToTopic"
      effect    = "Allow"
      actions   = ["sns:Publish"]
      resources = [statement.value]
    }
  }

  # An encrypted destination: its key, as the relay's role uses it.
  dynamic "statement" {
    for_each = length(local.destination_kms_key_arns) > 0 ? [local.destination_kms_key_arns] : []
    content {
      sid       = "EncryptForDestination"
      effect    = "Allow"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = var.ledger_enabled ? [local.ledger_table_arn] : []
    content {
      sid       = "RecordReplayedDeliveries"
      effect    = "Allow"
      actions   = ["dynamodb:UpdateItem", "dynamodb:PutItem"]
      resources = [statement.value]
    }
  }
}
