output "endpoint_url" {
  description = "The relay's Function URL."
  value       = module.relay.endpoint_url
}

output "dss_subscription" {
  description = "JSON body for PUT /v1/subscriptions?replica=aws (add hmac_secret_key, read from the hmac_secret_arn secret)."
  value       = module.relay.dss_subscription
}

output "hmac_key_id" {
  description = "keyId of the subscription (relay send --key-id)."
  value       = module.relay.hmac_key_id
}

# The secret itself is no output (outputs are kept in the state): read it from Secrets Manager.
output "hmac_secret_arn" {
  description = "Secrets Manager secret holding {\"<hmac_key_id>\": \"<secret>\"}: the subscription's hmac_secret_key, and RELAY_SEND_SECRET for relay send."
  value       = module.relay.hmac_secret_arn
}

output "queue_url" {
  description = "The queue notifications arrive on."
  value       = module.relay.queue_url
}

output "log_group_name" {
  description = "The function's log group (aws logs tail)."
  value       = module.relay.log_group_name
}

output "routes_url" {
  description = "The stored routes document (s3://<bucket>/<key>): RELAY_ROUTES_URL for relay routes and relay split."
  value       = module.relay.routes_url
}

output "split_prefix" {
  description = "Name prefix of the split queues and topics the relay may send to."
  value       = module.relay.split_prefix
}

output "route_writer_policy_json" {
  description = "IAM policy for the administrators of each route writer to attach: the routes document and the split queues."
  value       = module.relay.route_writer_policy_json
}

output "ledger_url" {
  description = "The delivery ledger (dynamodb://<table>): RELAY_LEDGER_URL for relay trace."
  value       = module.relay.ledger_url
}

output "ledger_reader_policy_json" {
  description = "IAM policy for whoever runs relay trace: GetItem and Query on the ledger table."
  value       = module.relay.ledger_reader_policy_json
}

output "archive_key_secret_arn" {
  description = "The archive's key, a Secrets Manager secret: RELAY_ARCHIVE_KEY_SECRET_ARN for relay replay."
  value       = module.relay.archive_key_secret_arn
}

output "archive_url" {
  description = "The archive (s3://<bucket>/<prefix>): RELAY_ARCHIVE_URL for relay replay."
  value       = module.relay.archive_url
}

output "archive_reader_policy_json" {
  description = "IAM policy for whoever runs relay replay: list and read the archive's prefix, read and write the ledger."
  value       = module.relay.archive_reader_policy_json
}

output "replay_environment" {
  description = "The RELAY_* variables relay replay, relay trace and relay split start --backfill run with (the relay's own, without its keys)."
  value       = module.relay.replay_environment
}

output "dashboard_url" {
  description = "The relay's CloudWatch dashboard in the console."
  value       = module.relay.dashboard_url
}

output "alarm_arns" {
  description = "The relay's CloudWatch alarms by purpose (needs_operator, bad_signature, unavailable, function_errors, throttles, dead_letters, undelivered, verified_refused, metric_lines_dropped)."
  value       = module.relay.alarm_arns
}
