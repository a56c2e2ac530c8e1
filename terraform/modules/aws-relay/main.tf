locals {
  hmac_key_id = coalesce(var.hmac_key_id, var.name)
  # Ephemeral: neither the generated secret nor this value is written to the plan or the state.
  # ephemeral.random_password.hmac is opened on every run (count cannot branch on a sensitive
  # input) and draws a new value each time; only the value of the run that writes the secret
  # version (a new hmac_secret_version) is kept, in Secrets Manager.
  hmac_secret = coalesce(var.hmac_secret, ephemeral.random_password.hmac.result)

  # The instruction set of bootstrap.zip: `make lambda` writes it to a file named architecture
  # next to the zip, so the function's architecture follows what was built. "" when neither that
  # file nor var.architecture says; a precondition on the function refuses the plan then.
  architecture_file  = "${dirname(var.lambda_zip_path)}/architecture"
  built_architecture = fileexists(local.architecture_file) ? trimspace(file(local.architecture_file)) : ""
  architecture       = var.architecture != null ? var.architecture : local.built_architecture

  queue_base_name = coalesce(var.queue_name, "${var.name}-events")
  queue_suffix    = var.fifo_queue ? ".fifo" : ""

  sqs_enabled = var.create_queue || var.existing_queue != null
  sns_enabled = var.sns_topic_arn != null

  queue_arn = var.create_queue ? aws_sqs_queue.this[0].arn : try(var.existing_queue.arn, null)
  queue_url = var.create_queue ? aws_sqs_queue.this[0].url : try(var.existing_queue.url, null)

  # The keys of the relay's own destination: a queue created here (kms_key_arn), an existing
  # queue's, the SNS topic's. A replayer needs them as the relay does.
  destination_kms_key_arns = distinct([
    for arn in [
      var.create_queue ? var.kms_key_arn : null,
      try(var.existing_queue.kms_key_arn, null),
      local.sns_enabled ? var.sns_topic_kms_key_arn : null,
    ] : arn if arn != null
  ])

  # Customer-managed keys the role must be able to use: the module's own key (secret, created
  # queue, log group, environment, created routes bucket, ledger table), the key of an existing queue, the key
  # of the SNS topic and the key of an existing routes bucket (routes.tf).
  kms_key_arns = distinct([
    for arn in [
      var.kms_key_arn,
      try(var.existing_queue.kms_key_arn, null),
      local.sns_enabled ? var.sns_topic_kms_key_arn : null,
      local.routes_kms_key_arn,
    ] : arn if arn != null
  ])

  # Every RELAY_* variable the function gets: the module's own, then extra_environment (which
  # may not name one of the module's). The HMAC keys and the archive's key are not among them:
  # the function reads the secrets RELAY_HMAC_KEYS_SECRET_ARN and RELAY_ARCHIVE_KEY_SECRET_ARN
  # name once, at start, as it reads its configuration file from the secret RELAY_CONFIG names.
  environment = merge(local.module_environment, var.extra_environment)
  module_environment = merge(
    {
      RELAY_HMAC_KEYS_SECRET_ARN = aws_secretsmanager_secret.hmac.arn
      RELAY_SINK_TIMEOUT_MS      = tostring(var.sink_timeout_ms)
      RELAY_MAX_CLOCK_SKEW_SECS  = tostring(var.max_clock_skew_secs)
      RELAY_LOG_FORMAT           = var.log_format
    },
    var.relay_config != null ? { RELAY_CONFIG = aws_secretsmanager_secret.relay_config[0].arn } : {},
    local.sqs_enabled ? { RELAY_SQS_QUEUE_URL = local.queue_url } : {},
    local.sns_enabled ? { RELAY_SNS_TOPIC_ARN = var.sns_topic_arn } : {},
    var.routes_enabled ? {
      RELAY_ROUTES_URL          = local.routes_url
      RELAY_ROUTES_REFRESH_SECS = tostring(var.routes_refresh_secs)
    } : {},
    var.ledger_enabled ? {
      RELAY_LEDGER_URL            = local.ledger_url
      RELAY_LEDGER_RETENTION_SECS = tostring(var.ledger_retention_secs)
    } : {},
    var.archive_enabled ? {
      RELAY_ARCHIVE_URL            = local.archive_url
      RELAY_ARCHIVE_KEY_SECRET_ARN = aws_secretsmanager_secret.archive_key[0].arn
      RELAY_ARCHIVE_RETENTION_DAYS = tostring(var.archive_retention_days)
    } : {},
    local.archive_firehose ? { RELAY_ARCHIVE_STREAM = "firehose://${local.archive_stream}" } : {},
  )

  # The Function URL ends with "/"; callback_path starts with one.
  callback_url = "${trimsuffix(aws_lambda_function_url.this.function_url, "/")}${var.callback_path}"
}

################################################################################
# HMAC key, in Secrets Manager
################################################################################

ephemeral "random_password" "hmac" {
  length  = 48
  special = false
}

resource "aws_secretsmanager_secret" "hmac" {
  #checkov:skip=CKV2_AWS_57:The secret is shared with a DSS subscription, which cannot change its hmac_secret_key; rotating means a new key id and a new subscription, which a rotation Lambda cannot do.
  name_prefix             = "${var.name}-hmac-keys-"
  description             = "RELAY_HMAC_KEYS of the ${var.name} relay: a JSON object {\"<keyId>\": \"<secret>\"}, read once at start."
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = var.tags
}

# RELAY_HMAC_KEYS: a JSON object {"<keyId>": "<secret>"}, in a write-only argument: Terraform
# sends it when secret_string_wo_version changes and keeps only that number in its state.
resource "aws_secretsmanager_secret_version" "hmac" {
  secret_id                = aws_secretsmanager_secret.hmac.id
  secret_string_wo         = jsonencode({ (local.hmac_key_id) = local.hmac_secret })
  secret_string_wo_version = var.hmac_secret_version
}

################################################################################
# SQS queue and dead-letter queue
################################################################################

resource "aws_sqs_queue" "dlq" {
  count = var.create_queue ? 1 : 0

  name                      = "${local.queue_base_name}-dlq${local.queue_suffix}"
  fifo_queue                = var.fifo_queue
  message_retention_seconds = var.dlq_message_retention_seconds
  sqs_managed_sse_enabled   = var.kms_key_arn == null ? true : null
  kms_master_key_id         = var.kms_key_arn
  tags                      = var.tags
}

resource "aws_sqs_queue" "this" {
  count = var.create_queue ? 1 : 0

  name       = "${local.queue_base_name}${local.queue_suffix}"
  fifo_queue = var.fifo_queue
  # The relay sets MessageDeduplicationId itself (a hash of subscription, bundle, version and
  # event), because DSS retries change the body's transaction_id.
  content_based_deduplication = false
  message_retention_seconds   = var.message_retention_seconds
  visibility_timeout_seconds  = var.visibility_timeout_seconds
  sqs_managed_sse_enabled     = var.kms_key_arn == null ? true : null
  kms_master_key_id           = var.kms_key_arn
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq[0].arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = var.tags
}

# TLS only, for everyone, on both queues; on the queue, the statements of
# queue_policy_documents too. The relay's role needs no statement here: its own policy grants
# sqs:SendMessage, in this account.
data "aws_iam_policy_document" "queue" {
  count = var.create_queue ? 1 : 0

  source_policy_documents = var.queue_policy_documents

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [aws_sqs_queue.this[0].arn]

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
}

data "aws_iam_policy_document" "dlq" {
  count = var.create_queue ? 1 : 0

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [aws_sqs_queue.dlq[0].arn]

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
}

resource "aws_sqs_queue_policy" "this" {
  count = var.create_queue ? 1 : 0

  queue_url = aws_sqs_queue.this[0].id
  policy    = data.aws_iam_policy_document.queue[0].json
}

resource "aws_sqs_queue_policy" "dlq" {
  count = var.create_queue ? 1 : 0

  queue_url = aws_sqs_queue.dlq[0].id
  policy    = data.aws_iam_policy_document.dlq[0].json
}

resource "aws_sqs_queue_redrive_allow_policy" "dlq" {
  count = var.create_queue ? 1 : 0

  queue_url = aws_sqs_queue.dlq[0].id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.this[0].arn]
  })
}

################################################################################
# Lambda function and its log group
################################################################################

resource "aws_cloudwatch_log_group" "this" {
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

resource "aws_lambda_function" "this" {
  #checkov:skip=CKV_AWS_116:The function is invoked synchronously through its Function URL; a Lambda dead-letter queue only receives failed asynchronous invocations. A failed relay answers non-2xx and the DSS retries.
  #checkov:skip=CKV_AWS_117:The function calls only public AWS endpoints (SQS, SNS, Secrets Manager, DynamoDB, S3); a VPC would add NAT or endpoints and no protection.
  #checkov:skip=CKV_AWS_272:The package is built from this repository by `make lambda` and uploaded by Terraform; there is no AWS Signer profile in this deployment.
  #checkov:skip=CKV_AWS_50:Active X-Ray tracing is an option (tracing_mode = "Active", with its grant); by default Lambda passes the caller's trace header through, and the relay passes it on to SQS (AWSTraceHeader) and SNS.
  function_name = var.name
  # The relay reads its configuration file once, at start: a new version of it changes the
  # description, and a changed configuration makes Lambda start new execution environments.
  description                    = var.relay_config != null ? "Relays signed HCA DSS notifications to SQS/SNS; configuration version ${aws_secretsmanager_secret_version.relay_config[0].version_id}." : "Relays signed HCA DSS notifications to SQS/SNS."
  role                           = local.role_arn
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [local.architecture]
  filename                       = var.lambda_zip_path
  source_code_hash               = filebase64sha256(var.lambda_zip_path)
  memory_size                    = var.memory_size
  timeout                        = var.timeout
  reserved_concurrent_executions = var.reserved_concurrency
  kms_key_arn                    = var.kms_key_arn

  environment {
    variables = local.environment
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.this.name
  }

  # The invocation's X-Ray trace id reaches the relay either way, which passes it on to the
  # messages (docs/destinations.md, Trace context); Active also records the function's segments.
  tracing_config {
    mode = var.tracing_mode
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.sink_timeout_ms < var.timeout * 1000
      error_message = "sink_timeout_ms must be below timeout * 1000: the relay must answer within its sink deadline, before Lambda times out."
    }
    precondition {
      condition     = !(var.create_queue && var.existing_queue != null)
      error_message = "Set either create_queue = true or existing_queue, not both."
    }
    precondition {
      condition     = local.sqs_enabled || local.sns_enabled
      error_message = "The relay needs a sink: create_queue = true, existing_queue, or sns_topic_arn."
    }
    precondition {
      condition     = contains(["arm64", "x86_64"], local.architecture)
      error_message = "Unknown architecture of the zip: `make lambda` writes it (arm64 or x86_64) to the file \"architecture\" next to bootstrap.zip. Build the zip with `make lambda`, or set architecture."
    }
    precondition {
      condition     = var.sns_topic_kms_key_arn == null || local.sns_enabled
      error_message = "sns_topic_kms_key_arn is the key of the topic sns_topic_arn names; set sns_topic_arn too, or leave it null."
    }
    precondition {
      condition     = var.routes_enabled || (var.routes_bucket == null && var.routes_bucket_kms_key_arn == null && var.split_prefix == null && length(var.route_writers) == 0)
      error_message = "routes_bucket, routes_bucket_kms_key_arn, split_prefix and route_writers take effect only with routes_enabled = true; set it, or leave them unset."
    }
    precondition {
      condition     = var.ledger_enabled || var.ledger_table_name == null
      error_message = "ledger_table_name takes effect only with ledger_enabled = true; set it, or leave ledger_table_name unset."
    }
    precondition {
      condition     = var.archive_enabled || (var.archive_bucket_name == null && var.archive_kms_key_arn == null && length(var.archive_readers) == 0)
      error_message = "archive_bucket_name, archive_kms_key_arn and archive_readers take effect only with archive_enabled = true; set it, or leave them unset."
    }
    precondition {
      condition     = length(setintersection(keys(var.extra_environment), keys(local.module_environment))) == 0
      error_message = "extra_environment names settings the module sets itself (${join(", ", setintersection(keys(var.extra_environment), keys(local.module_environment)))}): set them through the module's own inputs."
    }
    precondition {
      condition     = var.routes_bucket_kms_key_arn == null || var.routes_bucket != null
      error_message = "routes_bucket_kms_key_arn is the key of an existing routes_bucket; a bucket created here is encrypted with kms_key_arn."
    }
    precondition {
      condition     = var.existing_role_arn == null || (var.role_path == "/" && var.permissions_boundary_arn == null)
      error_message = "role_path and permissions_boundary_arn shape the role the module creates; with existing_role_arn it creates none: set them on that role, or leave them unset."
    }
    precondition {
      condition     = length(var.queue_policy_documents) == 0 || var.create_queue
      error_message = "queue_policy_documents join the policy of the queue the module creates (create_queue = true); an existing queue's policy is its owner's (aws-queue-grant)."
    }
  }

  # The first notification finds its grants, its secrets and, with the archive, its bucket.
  depends_on = [
    aws_iam_role_policy.this,
    aws_secretsmanager_secret_version.hmac,
    aws_secretsmanager_secret_version.relay_config,
    aws_s3_bucket.archive,
  ]
}

################################################################################
# Function URL: public on purpose
################################################################################

# The DSS signs each request with draft-cavage HMAC in the Authorization header. AWS_IAM auth
# would demand SigV4 in that same header, which the DSS cannot send, so the URL takes
# authorization NONE and the relay verifies the HMAC signature itself before publishing anything.
resource "aws_lambda_function_url" "this" {
  #checkov:skip=CKV_AWS_258:The DSS signs with HMAC in the Authorization header and cannot sign SigV4; the relay verifies every request's signature itself and answers 401 otherwise.
  function_name      = aws_lambda_function.this.function_name
  authorization_type = "NONE"
  invoke_mode        = "BUFFERED"
}

# A public Function URL needs both statements since October 2025: lambda:InvokeFunctionUrl (auth
# type NONE) and lambda:InvokeFunction (only through a Function URL). Both are kept, on purpose,
# although aws_lambda_function_url with authorization NONE adds equivalent statements of its own
# (FunctionURLAllowPublicAccess and, in recent 6.x releases, FunctionURLAllowInvokeAction): the
# provider adds those once, at creation, keeps them out of the state, never restores them and
# leaves them behind on destroy, and which 6.x releases add the second is not pinned down. These
# two have their own ids (no conflict with the provider's), are in the state, are put back by the
# next apply if removed, and go away with the module. The duplicates are harmless: identical
# Allow statements under other ids.
resource "aws_lambda_permission" "function_url" {
  #checkov:skip=CKV_AWS_301:Public by design: the DSS cannot present AWS credentials. The statement only allows calls through the Function URL (lambda:FunctionUrlAuthType NONE), and the relay verifies HMAC.
  statement_id           = "AllowPublicFunctionUrl"
  action                 = "lambda:InvokeFunctionUrl"
  function_name          = aws_lambda_function.this.function_name
  principal              = "*"
  function_url_auth_type = "NONE"
}

resource "aws_lambda_permission" "function_url_invoke" {
  #checkov:skip=CKV_AWS_301:Public by design: the DSS cannot present AWS credentials. The statement only allows invocations through the Function URL (lambda:InvokedViaFunctionUrl), and the relay verifies HMAC.
  statement_id             = "AllowInvokeViaFunctionUrl"
  action                   = "lambda:InvokeFunction"
  function_name            = aws_lambda_function.this.function_name
  principal                = "*"
  invoked_via_function_url = true
}
