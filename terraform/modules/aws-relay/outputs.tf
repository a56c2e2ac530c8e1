################################################################################
# Endpoint and DSS subscription
################################################################################

output "endpoint_url" {
  description = "The Function URL (https://<id>.lambda-url.<region>.on.aws/)."
  value       = aws_lambda_function_url.this.function_url
}

output "callback_url" {
  description = "The Function URL with callback_path: the subscription's callback_url."
  value       = local.callback_url
}

output "dss_subscription" {
  description = "JSON body for PUT /v1/subscriptions on the DSS, without the secret: add hmac_secret_key, read from Secrets Manager (hmac_secret_arn)."
  value = jsonencode({
    callback_url = local.callback_url
    method       = "POST"
    encoding     = "application/json"
    hmac_key_id  = local.hmac_key_id
  })
}

output "hmac_key_id" {
  description = "keyId the DSS signs with (the subscription's hmac_key_id)."
  value       = local.hmac_key_id
}

# No hmac_secret output: the secret is ephemeral and stays out of the state. Read it from Secrets
# Manager (hmac_secret_arn; README.md, "Deploy to AWS").
output "hmac_secret_arn" {
  description = "ARN of the Secrets Manager secret holding RELAY_HMAC_KEYS: the JSON object {\"<hmac_key_id>\": \"<secret>\"}, whose value for hmac_key_id is the subscription's hmac_secret_key."
  value       = aws_secretsmanager_secret.hmac.arn
}

output "relay_config_secret_arn" {
  description = "RELAY_CONFIG: ARN of the Secrets Manager secret holding relay_config, the relay's configuration file (also in replay_environment; archive_reader_policy_json grants reading it). null without relay_config."
  value       = one(aws_secretsmanager_secret.relay_config[*].arn)
}

################################################################################
# Lambda function
################################################################################

output "function_name" {
  description = "Name of the Lambda function."
  value       = aws_lambda_function.this.function_name
}

output "function_arn" {
  description = "ARN of the Lambda function."
  value       = aws_lambda_function.this.arn
}

output "architecture" {
  description = "Instruction set of the function (arm64 or x86_64): architecture, or what `make lambda` recorded next to the zip."
  value       = try(aws_lambda_function.this.architectures[0], null)
}

output "role_arn" {
  description = "ARN of the function's execution role (the one created here, or existing_role_arn): the principal a cross-account queue policy (aws-queue-grant) lets send."
  value       = local.role_arn
}

output "role_name" {
  description = "Name of the function's execution role (the one created here, or existing_role_arn's)."
  value       = local.role_name
}

output "role_policy_json" {
  description = "The execution role's IAM policy (JSON): exactly what the enabled sinks, the secrets, the routes, the ledger and the archive call. The module attaches it inline to the role it creates; with existing_role_arn, attach it to that role (aws iam put-role-policy --role-name <role> --policy-name relay --policy-document \"$(terraform output -raw role_policy_json)\"), and again after every apply that changes it."
  value       = data.aws_iam_policy_document.this.json
}

output "log_group_name" {
  description = "CloudWatch log group of the function."
  value       = aws_cloudwatch_log_group.this.name
}

################################################################################
# SQS queue
################################################################################

output "queue_arn" {
  description = "ARN of the queue the relay publishes to (created or existing); null without a queue."
  value       = local.queue_arn
}

output "queue_url" {
  description = "URL of the queue the relay publishes to (created or existing); null without a queue."
  value       = local.queue_url
}

output "dlq_arn" {
  description = "ARN of the created dead-letter queue; null when the queue was not created here."
  value       = try(aws_sqs_queue.dlq[0].arn, null)
}

output "dlq_url" {
  description = "URL of the created dead-letter queue; null when the queue was not created here."
  value       = try(aws_sqs_queue.dlq[0].url, null)
}

################################################################################
# Alarms
################################################################################

output "alarm_arns" {
  description = "ARNs of the CloudWatch alarms by purpose (needs_operator, bad_signature, unavailable, function_errors, throttles, dead_letters, undelivered, verified_refused, metric_lines_dropped, archive_delivery); absent when not created."
  value = merge(
    { for alarm in aws_cloudwatch_metric_alarm.needs_operator : "needs_operator" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.bad_signature : "bad_signature" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.unavailable : "unavailable" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.function_errors : "function_errors" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.throttles : "throttles" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.dead_letters : "dead_letters" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.undelivered : "undelivered" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.verified_refused : "verified_refused" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.metric_lines_dropped : "metric_lines_dropped" => alarm.arn },
    { for alarm in aws_cloudwatch_metric_alarm.archive_delivery : "archive_delivery" => alarm.arn },
  )
}

################################################################################
# Dashboard
################################################################################

output "dashboard_name" {
  description = "Name of the CloudWatch dashboard (the relay's name); null without dashboard_enabled."
  value       = one(aws_cloudwatch_dashboard.this[*].dashboard_name)
}

output "dashboard_url" {
  description = "The dashboard in the CloudWatch console (https://<region>.console.aws.amazon.com/cloudwatch/home?region=<region>#dashboards/dashboard/<name>); null without dashboard_enabled."
  value       = var.dashboard_enabled ? "https://${local.region}.console.aws.amazon.com/cloudwatch/home?region=${local.region}#dashboards/dashboard/${one(aws_cloudwatch_dashboard.this[*].dashboard_name)}" : null
}

################################################################################
# Live routes and splits
################################################################################

output "routes_url" {
  description = "RELAY_ROUTES_URL, s3://<bucket>/<key>: the stored routes document the relay reads, and the --routes (or RELAY_ROUTES_URL) of `relay routes` and `relay split`; null without routes_enabled."
  value       = local.routes_url
}

output "routes_bucket" {
  description = "The bucket holding the routes document (routes_bucket, or the one created here); null without routes_enabled."
  value       = local.routes_bucket
}

output "split_prefix" {
  description = "Name prefix of the split destinations the relay may send to (queues and topics <split_prefix>… in this account and region); null without routes_enabled."
  value       = var.routes_enabled ? local.split_prefix : null
}

output "stored_sink_allowed" {
  description = "What a stored sink may send to, comma-separated, for `relay routes put --allowed`: the relay's queue, sns_topic_arn, the split queues and topics (<split_prefix>*), stored_sink_queue_arns and stored_sink_topic_arns, as the role's policy names them; null without routes_enabled."
  value = var.routes_enabled ? join(",", compact(concat(
    [local.queue_arn, var.sns_topic_arn, local.split_queue_arns, local.split_topic_arns],
    var.stored_sink_queue_arns,
    var.stored_sink_topic_arns,
  ))) : null
}

output "route_writer_policy_json" {
  description = "IAM policy (JSON) for the administrators of each route_writers principal to attach to it: read and write the routes document, list only its key, and create, read and delete the split queues <split_prefix>…; with a customer-managed key on the bucket, use that key. null without routes_enabled."
  value       = one(data.aws_iam_policy_document.route_writers[*].json)
}

################################################################################
# Delivery ledger
################################################################################

output "ledger_url" {
  description = "RELAY_LEDGER_URL, dynamodb://<table>: the delivery ledger the relay writes, and the RELAY_LEDGER_URL of `relay trace BUNDLE_UUID`; null without ledger_enabled."
  value       = local.ledger_url
}

output "ledger_table_name" {
  description = "Name of the ledger's DynamoDB table; null without ledger_enabled."
  value       = one(aws_dynamodb_table.ledger[*].name)
}

output "ledger_table_arn" {
  description = "ARN of the ledger's DynamoDB table; null without ledger_enabled."
  value       = local.ledger_table_arn
}

output "ledger_reader_policy_json" {
  description = "IAM policy (JSON) for whoever runs `relay trace` to attach: dynamodb:GetItem and dynamodb:Query on the ledger table; with kms_key_arn, kms:Decrypt with that key. null without ledger_enabled."
  value       = one(data.aws_iam_policy_document.ledger_readers[*].json)
}

################################################################################
# Archive
################################################################################

output "replay_environment" {
  description = "The RELAY_* variables `relay replay`, `relay trace` and `relay split start --backfill` run with: the relay's own, with its configuration file (RELAY_CONFIG, with relay_config), destinations, ledger and archive, without the HMAC keys' secret (a replay verifies nothing), without its log format, and without the archive's delivery stream (a replay reads the archive and writes none of it). Export them before running the command; the archive's key and the configuration file are read from their secrets (RELAY_ARCHIVE_KEY_SECRET_ARN, RELAY_CONFIG), with archive_reader_policy_json's grant."
  value = {
    for name, value in local.environment : name => value
    if !contains(["RELAY_HMAC_KEYS_SECRET_ARN", "RELAY_LOG_FORMAT", "RELAY_ARCHIVE_STREAM"], name)
  }
}

output "archive_url" {
  description = "RELAY_ARCHIVE_URL, s3://<bucket>/<prefix>: the archive the relay writes every verified notification to, and the RELAY_ARCHIVE_URL of `relay replay`; null without archive_enabled."
  value       = local.archive_url
}

output "archive_key_secret_arn" {
  description = "ARN of the Secrets Manager secret holding the archive's key (RELAY_ARCHIVE_KEY): the relay seals every record with it, and `relay replay` takes it as RELAY_ARCHIVE_KEY_SECRET_ARN to open them; archive_reader_policy_json grants reading it. null without archive_enabled."
  value       = one(aws_secretsmanager_secret.archive_key[*].arn)
}

output "archive_stream" {
  description = "RELAY_ARCHIVE_STREAM, firehose://<name>-archive: the delivery stream the relay writes the archive's records through; null without archive_enabled or archive_firehose."
  value       = local.archive_firehose ? "firehose://${local.archive_stream}" : null
}

output "archive_bucket" {
  description = "Name of the archive's S3 bucket; null without archive_enabled."
  value       = one(aws_s3_bucket.archive[*].bucket)
}

output "archive_reader_policy_json" {
  description = "IAM policy (JSON) for whoever runs `relay replay` to attach (the administrators of each archive_readers principal): s3:ListBucket on the archive's prefix and s3:GetObject under it, secretsmanager:GetSecretValue on the archive's key (archive_key_secret_arn) and, with relay_config, on the configuration file's secret (relay_config_secret_arn), and, with kms_key_arn, kms:Decrypt with that key; with archive_kms_key_arn, kms:Decrypt with that key; with ledger_enabled, what ledger_reader_policy_json grants and dynamodb:UpdateItem and dynamodb:PutItem on the ledger table; sqs:SendMessage on the relay's queue or sns:Publish on its topic, and kms:GenerateDataKey and kms:Decrypt with their keys; with routes_enabled, the role's own statements for the stored routes (reading the document) and what they may name (the splits' queues and topics under split_prefix, stored_sink_queue_arns, stored_sink_topic_arns). A destination under a customer-managed key other than the relay's needs that key's grant too. null without archive_enabled."
  value       = one(data.aws_iam_policy_document.archive_readers[*].json)
}
