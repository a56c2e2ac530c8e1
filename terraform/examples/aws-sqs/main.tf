# A relay in one account publishing to a standard SQS queue it creates (with a dead-letter queue):
# the module's defaults (create_queue = true, fifo_queue = false), with live routes and splits
# and the delivery ledger.
provider "aws" {
  region = var.region
}

module "relay" {
  source = "../../modules/aws-relay"

  name            = var.name
  lambda_zip_path = var.lambda_zip_path # make lambda
  # 200 by default; an account whose concurrency quota is under 300 needs less, or null.
  reserved_concurrency = var.reserved_concurrency

  # Consumers can tell replicas apart by the callback path (payloads carry no replica).
  callback_path = "/?replica=aws"

  # The relay's alarms (refused and failed answers, throttles, dead letters) notify these (an
  # SNS topic, say).
  alarm_actions = var.alarm_actions

  # Live routes and splits: a bucket for the stored routes document, which these principals
  # change with `relay routes` and `relay split` (they also need route_writer_policy_json).
  routes_enabled = true
  route_writers  = var.route_writers

  # The delivery ledger (a DynamoDB table): a DSS retry publishes only where it was not
  # acknowledged yet, and `relay trace BUNDLE_UUID` shows what happened to a bundle.
  ledger_enabled = true

  # The archive, for `relay replay`: the operators who change the routes also replay.
  archive_enabled = true
  archive_readers = var.route_writers

  # Other senders beside the DSS (a GitHub webhook, say): their sources in the relay's
  # configuration file, their secrets in Secrets Manager (README, "Other senders").
  relay_config       = var.relay_config
  source_secret_arns = var.source_secret_arns
}
