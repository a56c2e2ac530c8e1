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

# With existing_role_arn the module creates no role: the role's owner attaches role_policy_json
# (the document below) to it.
resource "aws_iam_role" "this" {
  count = local.create_role ? 1 : 0

  name                 = "${var.name}-relay"
  path                 = var.role_path
  description          = "Execution role of the ${var.name} DSS relay."
  assume_role_policy   = data.aws_iam_policy_document.assume_role.json
  permissions_boundary = var.permissions_boundary_arn
  max_session_duration = 3600
  tags                 = var.tags
}

# The role and its policy were single resources before existing_role_arn: keep them in place.
moved {
  from = aws_iam_role.this
  to   = aws_iam_role.this[0]
}

moved {
  from = aws_iam_role_policy.this
  to   = aws_iam_role_policy.this[0]
}

locals {
  create_role = var.existing_role_arn == null
  role_arn    = local.create_role ? aws_iam_role.this[0].arn : var.existing_role_arn
  role_name   = local.create_role ? aws_iam_role.this[0].name : element(split("/", var.existing_role_arn), length(split("/", var.existing_role_arn)) - 1)

  # Every customer-managed key the role may use: those of main.tf (the module's, an existing
  # queue's, the SNS topic's, an existing routes bucket's) and those of the stored sinks.
  role_kms_key_arns = distinct(concat(local.kms_key_arns, var.routes_enabled ? var.stored_sink_kms_key_arns : []))

  # The regions of the queues and topics the relay sends to: its own region (a created queue,
  # the split queues and topics) and those an ARN given names.
  destination_regions = distinct(concat(
    [local.region],
    [for arn in compact([try(var.existing_queue.arn, null), var.sns_topic_arn]) : split(":", arn)[3]],
    var.routes_enabled ? [for arn in concat(var.stored_sink_queue_arns, var.stored_sink_topic_arns) : split(":", arn)[3]] : [],
  ))

  # The services that use the role's customer-managed keys on its behalf (kms:ViaService): Secrets
  # Manager (its secrets), S3 (the routes document), DynamoDB (the ledger) and Lambda (the
  # function's environment) in the function's region, SQS and SNS wherever a destination is.
  # The keys are usable through nothing else, not even by a direct KMS call with the role's
  # credentials.
  kms_via_services = distinct(concat(
    [for service in ["secretsmanager", "s3", "dynamodb", "lambda"] : "${service}.${local.region}.amazonaws.com"],
    flatten([for region in local.destination_regions : ["sqs.${region}.amazonaws.com", "sns.${region}.amazonaws.com"]]),
  ))
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

  # RELAY_CONFIG: the configuration file, read once at start (config.tf).
  dynamic "statement" {
    for_each = var.relay_config != null ? [aws_secretsmanager_secret.relay_config[0].arn] : []
    content {
      sid       = "ReadRelayConfig"
      effect    = "Allow"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = [statement.value]
    }
  }

  # RELAY_CONFIG's [sources.<name>] secret_arn: each source's signing secret, read once at start;
  # exactly the ARNs of source_secret_arns.
  dynamic "statement" {
    for_each = length(var.source_secret_arns) > 0 ? [distinct(values(var.source_secret_arns))] : []
    content {
      sid       = "ReadSourceSecrets"
      effect    = "Allow"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = statement.value
    }
  }

  # Their customer-managed keys, through Secrets Manager only.
  dynamic "statement" {
    for_each = length(var.source_secret_kms_key_arns) > 0 ? [var.source_secret_kms_key_arns] : []
    content {
      sid       = "DecryptSourceSecrets"
      effect    = "Allow"
      actions   = ["kms:Decrypt"]
      resources = statement.value

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = [for region in local.source_secret_regions : "secretsmanager.${region}.amazonaws.com"]
      }
    }
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

  # RELAY_ARCHIVE_STREAM: the records go through the archive's delivery stream, and only that
  # one (at start, RELAY_WARM_CONNECTIONS opens the connection with a PutRecordBatch of no
  # record, which Firehose refuses).
  # tracing_mode = "Active": the function's segments sent to X-Ray (the calls take no resource).
  dynamic "statement" {
    for_each = var.tracing_mode == "Active" ? ["*"] : []
    content {
      sid       = "SendTraces"
      effect    = "Allow"
      actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = local.archive_firehose ? [local.archive_stream_arn] : []
    content {
      sid       = "WriteArchiveStream"
      effect    = "Allow"
      actions   = ["firehose:PutRecord", "firehose:PutRecordBatch"]
      resources = [statement.value]
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
  # reading a record back Decrypt; through S3 only.
  dynamic "statement" {
    for_each = var.archive_enabled && var.archive_kms_key_arn != null ? [var.archive_kms_key_arn] : []
    content {
      sid       = "EncryptArchive"
      effect    = "Allow"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${local.region}.amazonaws.com"]
      }
    }
  }

  # Only with customer-managed keys: SQS and SNS need GenerateDataKey and Decrypt from the sender
  # of an encrypted message; reading a secret, the ledger, or a routes document encrypted with
  # one, needs Decrypt. The stored sinks' keys (stored_sink_kms_key_arns) are among them. Only
  # through the services that use them (local.kms_via_services).
  dynamic "statement" {
    for_each = length(local.role_kms_key_arns) > 0 ? [local.role_kms_key_arns] : []
    content {
      sid       = "UseCustomerManagedKeys"
      effect    = "Allow"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = statement.value

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = local.kms_via_services
      }
    }
  }
}

resource "aws_iam_role_policy" "this" {
  count = local.create_role ? 1 : 0

  name   = "relay"
  role   = aws_iam_role.this[0].id
  policy = data.aws_iam_policy_document.this.json
}
