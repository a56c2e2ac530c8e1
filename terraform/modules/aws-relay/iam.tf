################################################################################
# Execution role: exactly what the enabled sinks call, and nothing else
################################################################################

data "aws_iam_policy_document" "assume_role" {
  statement {
    sid     = "LambdaAssumesRole"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "this" {
  name                 = "${var.name}-relay"
  description          = "Execution role of the ${var.name} DSS relay."
  assume_role_policy   = data.aws_iam_policy_document.assume_role.json
  max_session_duration = 3600
  tags                 = var.tags
}

locals {
  # Every customer-managed key the role may use: those of main.tf (the module's, an existing
  # queue's, the SNS topic's, an existing routes bucket's) and those of the stored sinks.
  role_kms_key_arns = distinct(concat(local.kms_key_arns, var.routes_enabled ? var.stored_sink_kms_key_arns : []))
}

# No managed policy (AWSLambdaBasicExecutionRole would allow logs:CreateLogGroup on "*"): the
# function writes only to its own log group, which this module creates.
data "aws_iam_policy_document" "this" {
  statement {
    sid       = "WriteOwnLogs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.this.arn}:*"]
  }

  statement {
    sid       = "ReadOwnHmacKeys"
    effect    = "Allow"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [aws_secretsmanager_secret.hmac.arn]
  }

  # RELAY_ARCHIVE_KEY_SECRET_ARN: the key the archive's records are sealed with.
  dynamic "statement" {
    for_each = var.archive_enabled ? [aws_secretsmanager_secret.archive_key[0].arn] : []
    content {
      sid       = "ReadOwnArchiveKey"
      effect    = "Allow"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [statement.value]
    }
  }

  # RELAY_SQS_QUEUE_URL: SendMessage and SendMessageBatch are both authorized by sqs:SendMessage.
  dynamic "statement" {
    for_each = local.sqs_enabled ? [local.queue_arn] : []
    content {
      sid       = "SendToQueue"
      effect    = "Allow"
      actions   = ["sqs:SendMessage"]
      resources = [statement.value]
    }
  }

  # RELAY_SNS_TOPIC_ARN: Publish and PublishBatch are both authorized by sns:Publish.
  dynamic "statement" {
    for_each = local.sns_enabled ? [var.sns_topic_arn] : []
    content {
      sid       = "PublishToTopic"
      effect    = "Allow"
      actions   = ["sns:Publish"]
      resources = [statement.value]
    }
  }

  # RELAY_ROUTES_URL: the stored routes document, GetObject (conditional on its ETag) …
  dynamic "statement" {
    for_each = var.routes_enabled ? [local.routes_object_arn] : []
    content {
      sid       = "ReadStoredRoutes"
      effect    = "Allow"
      actions   = ["s3:GetObject"]
      resources = [statement.value]
    }
  }

  # … and ListBucket limited to the document's key: without it S3 answers 403 for a missing
  # object, and the relay must see 404 (no stored routes) to start.
  dynamic "statement" {
    for_each = var.routes_enabled ? [local.routes_bucket_arn] : []
    content {
      sid       = "FindStoredRoutes"
      effect    = "Allow"
      actions   = ["s3:ListBucket"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "s3:prefix"
        values   = [var.routes_key]
      }
    }
  }

  # RELAY_ROUTES_URL: splits and stored sinks send to queues and topics named <split_prefix>…
  # in this account and region (the split queues route_writers create, or a developer's own).
  dynamic "statement" {
    for_each = var.routes_enabled ? [local.split_queue_arns] : []
    content {
      sid       = "SendToSplitQueues"
      effect    = "Allow"
      actions   = ["sqs:SendMessage"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = var.routes_enabled ? [local.split_topic_arns] : []
    content {
      sid       = "PublishToSplitTopics"
      effect    = "Allow"
      actions   = ["sns:Publish"]
      resources = [statement.value]
    }
  }

  # RELAY_ROUTES_URL: stored sinks ([sinks.<name>] of the document) outside the split prefix
  # send to exactly the queues and topics the operator names, each by its ARN.
  dynamic "statement" {
    for_each = var.routes_enabled && length(var.stored_sink_queue_arns) > 0 ? [var.stored_sink_queue_arns] : []
    content {
      sid       = "SendToStoredSinkQueues"
      effect    = "Allow"
      actions   = ["sqs:SendMessage"]
      resources = statement.value
    }
  }

  dynamic "statement" {
    for_each = var.routes_enabled && length(var.stored_sink_topic_arns) > 0 ? [var.stored_sink_topic_arns] : []
    content {
      sid       = "PublishToStoredSinkTopics"
      effect    = "Allow"
      actions   = ["sns:Publish"]
      resources = statement.value
    }
  }

  # RELAY_LEDGER_URL: the delivery ledger's conditional writes (UpdateItem) and the reset of an
  # expired item (PutItem), on the table only; the relay neither reads, queries nor deletes.
  dynamic "statement" {
    for_each = var.ledger_enabled ? [local.ledger_table_arn] : []
    content {
      sid       = "WriteLedger"
      effect    = "Allow"
      actions   = ["dynamodb:UpdateItem", "dynamodb:PutItem"]
      resources = [statement.value]
    }
  }

  # RELAY_ARCHIVE_URL: one new object per verified notification, PutObject with If-None-Match: *
  # (412 when the key exists), under the archive's prefix only; the relay neither lists nor
  # deletes the archive. The bucket policy refuses the same PutObject without the header.
  dynamic "statement" {
    for_each = var.archive_enabled ? [local.archive_objects_arn] : []
    content {
      sid       = "WriteArchive"
      effect    = "Allow"
      actions   = ["s3:PutObject"]
      resources = [statement.value]

      condition {
        test     = "Null"
        variable = "s3:if-none-match"
        values   = ["false"]
      }
    }
  }

  # RELAY_ARCHIVE_URL: after a 412, the object at the key is read back, and counts as written
  # only if it is the notification's sealed record; under the prefix only.
  dynamic "statement" {
    for_each = var.archive_enabled ? [local.archive_objects_arn] : []
    content {
      sid       = "ReadArchivedRecord"
      effect    = "Allow"
      actions   = ["s3:GetObject"]
      resources = [statement.value]
    }
  }

  # RELAY_ARCHIVE_URL with archive_kms_key_arn: a PutObject under SSE-KMS needs GenerateDataKey,
  # reading a record back Decrypt.
  dynamic "statement" {
    for_each = var.archive_enabled && var.archive_kms_key_arn != null ? [var.archive_kms_key_arn] : []
    content {
      sid       = "EncryptArchive"
      effect    = "Allow"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = [statement.value]
    }
  }

  # Only with customer-managed keys: SQS and SNS need GenerateDataKey and Decrypt from the sender
  # of an encrypted message; reading the secret, or a routes document encrypted with one, needs
  # Decrypt. The stored sinks' keys (stored_sink_kms_key_arns) are among them.
  dynamic "statement" {
    for_each = length(local.role_kms_key_arns) > 0 ? [local.role_kms_key_arns] : []
    content {
      sid       = "UseCustomerManagedKeys"
      effect    = "Allow"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = statement.value
    }
  }
}

resource "aws_iam_role_policy" "this" {
  name   = "relay"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.this.json
}
