################################################################################
# Live routes and splits: the stored routes document and its bucket
################################################################################

# The relay reads the document at RELAY_ROUTES_URL at start and again at most every
# RELAY_ROUTES_REFRESH_SECS, with a GetObject conditional on the ETag it has. route_writers
# change it with `relay routes` and `relay split`, which write with PutObject conditional on the
# ETag they read (If-Match), or on there being no object yet (If-None-Match: *), so that two
# writers never lose each other's change. The module does not create the object: a missing
# object means no stored routes.

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

data "aws_region" "current" {}

locals {
  create_routes_bucket = var.routes_enabled && var.routes_bucket == null

  partition  = data.aws_partition.current.partition
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.region

  # The bucket's name, known before the bucket exists when it is given; null without routes.
  routes_bucket = !var.routes_enabled ? null : (
    var.routes_bucket != null ? var.routes_bucket : one(aws_s3_bucket.routes[*].bucket)
  )
  routes_url        = var.routes_enabled ? "s3://${local.routes_bucket}/${var.routes_key}" : null
  routes_bucket_arn = var.routes_enabled ? "arn:${local.partition}:s3:::${local.routes_bucket}" : null
  routes_object_arn = var.routes_enabled ? "${local.routes_bucket_arn}/${var.routes_key}" : null

  # The key that encrypts the document, if it is a customer-managed one.
  routes_kms_key_arn = !var.routes_enabled ? null : (
    local.create_routes_bucket ? var.kms_key_arn : var.routes_bucket_kms_key_arn
  )

  # Split destinations: queues `relay split start --create` creates, and queues or topics a
  # developer names so, in this account and region.
  split_prefix     = coalesce(var.split_prefix, "${var.name}-split-")
  split_queue_arns = "arn:${local.partition}:sqs:${local.region}:${local.account_id}:${local.split_prefix}*"
  split_topic_arns = "arn:${local.partition}:sns:${local.region}:${local.account_id}:${local.split_prefix}*"

  # S3 bucket names are lowercase letters, digits and hyphens; var.name may hold capitals and
  # underscores. bucket_prefix takes at most 37 characters.
  routes_bucket_prefix = "${substr(coalesce(trim(replace(lower(var.name), "/[^a-z0-9-]/", "-"), "-"), "relay"), 0, 29)}-routes-"
}

################################################################################
# The bucket, when none is given
################################################################################

resource "aws_s3_bucket" "routes" {
  #checkov:skip=CKV_AWS_18:The bucket holds one small document that the relay reads and a few developers write; server access logs would need a second bucket, and CloudTrail data events on this bucket record who read or wrote it where that is wanted.
  #checkov:skip=CKV_AWS_144:Only the relays in this region read the document; a replica in another region would serve no reader, and every write is kept here by versioning.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to a write: every relay instance polls the document itself (RELAY_ROUTES_REFRESH_SECS), so event notifications would have no consumer.
  count = local.create_routes_bucket ? 1 : 0

  bucket_prefix = local.routes_bucket_prefix
  force_destroy = var.routes_force_destroy
  tags          = var.tags
}

# Every write is kept: an earlier document can be restored, and the noncurrent versions expire
# after routes_noncurrent_version_days.
resource "aws_s3_bucket_versioning" "routes" {
  count = local.create_routes_bucket ? 1 : 0

  bucket = aws_s3_bucket.routes[0].id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "routes" {
  count = local.create_routes_bucket ? 1 : 0

  bucket = aws_s3_bucket.routes[0].id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # With SSE-KMS, one data key per bucket for a while instead of a KMS call per read.
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_public_access_block" "routes" {
  count = local.create_routes_bucket ? 1 : 0

  bucket                  = aws_s3_bucket.routes[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# No ACLs: the bucket owner owns every object, also those a writer in another account puts.
resource "aws_s3_bucket_ownership_controls" "routes" {
  count = local.create_routes_bucket ? 1 : 0

  bucket = aws_s3_bucket.routes[0].id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "routes" {
  count = local.create_routes_bucket ? 1 : 0

  bucket = aws_s3_bucket.routes[0].id

  rule {
    id     = "expire-replaced-documents"
    status = "Enabled"

    filter {}

    noncurrent_version_expiration {
      noncurrent_days = var.routes_noncurrent_version_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  depends_on = [aws_s3_bucket_versioning.routes]
}

# TLS (1.2 or later) only, for everyone; and, for route_writers, reading and writing the one
# document, with ListBucket on its key alone (S3 answers 404 rather than 403 for a missing object
# only to a caller who may list it). This policy is what lets writers in another account in.
data "aws_iam_policy_document" "routes_bucket" {
  count = local.create_routes_bucket ? 1 : 0

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.routes[0].arn, "${aws_s3_bucket.routes[0].arn}/*"]

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
    resources = [aws_s3_bucket.routes[0].arn, "${aws_s3_bucket.routes[0].arn}/*"]

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

  dynamic "statement" {
    for_each = length(var.route_writers) > 0 ? [var.route_writers] : []
    content {
      sid       = "RouteWritersReadWriteDocument"
      effect    = "Allow"
      actions   = ["s3:GetObject", "s3:PutObject"]
      resources = ["${aws_s3_bucket.routes[0].arn}/${var.routes_key}"]

      principals {
        type        = "AWS"
        identifiers = statement.value
      }
    }
  }

  dynamic "statement" {
    for_each = length(var.route_writers) > 0 ? [var.route_writers] : []
    content {
      sid       = "RouteWritersFindDocument"
      effect    = "Allow"
      actions   = ["s3:ListBucket"]
      resources = [aws_s3_bucket.routes[0].arn]

      principals {
        type        = "AWS"
        identifiers = statement.value
      }

      condition {
        test     = "StringEquals"
        variable = "s3:prefix"
        values   = [var.routes_key]
      }
    }
  }
}

resource "aws_s3_bucket_policy" "routes" {
  count = local.create_routes_bucket ? 1 : 0

  bucket = aws_s3_bucket.routes[0].id
  policy = data.aws_iam_policy_document.routes_bucket[0].json

  # S3 refuses a policy while the public access block is being put in place.
  depends_on = [aws_s3_bucket_public_access_block.routes]
}

################################################################################
# What route_writers need on their own side (output route_writer_policy_json)
################################################################################

# An identity policy for the writers' administrators to attach to each writer: the document
# (also needed on top of the bucket policy by a writer in another account), and the split
# queues `relay split start --create` creates and `relay split stop`/`gc` delete. SQS creates a
# queue in the caller's own account, so only a writer in this account can create a split queue
# the relay may send to.
data "aws_iam_policy_document" "route_writers" {
  count = var.routes_enabled ? 1 : 0

  statement {
    sid       = "ReadWriteStoredRoutes"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = [local.routes_object_arn]
  }

  statement {
    sid       = "FindStoredRoutes"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [local.routes_bucket_arn]

    condition {
      test     = "StringEquals"
      variable = "s3:prefix"
      values   = [var.routes_key]
    }
  }

  # `relay split` calls CreateQueue (its FIFO attributes go with it) and DeleteQueue; a developer
  # reads a split's queue with ReceiveMessage and DeleteMessage. Not SetQueueAttributes (a queue
  # policy could share a split queue with any account) nor TagQueue: the CLI sets neither.
  statement {
    sid    = "ManageSplitQueues"
    effect = "Allow"
    actions = [
      "sqs:CreateQueue",
      "sqs:DeleteMessage",
      "sqs:DeleteQueue",
      "sqs:GetQueueAttributes",
      "sqs:GetQueueUrl",
      "sqs:ReceiveMessage",
    ]
    resources = [local.split_queue_arns]
  }

  # SSE-KMS: PutObject needs GenerateDataKey, GetObject needs Decrypt.
  dynamic "statement" {
    for_each = local.routes_kms_key_arn != null ? [local.routes_kms_key_arn] : []
    content {
      sid       = "UseStoredRoutesKey"
      effect    = "Allow"
      actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
      resources = [statement.value]
    }
  }
}
