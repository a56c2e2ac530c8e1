# A relay in one account publishing to a standard SQS queue it creates (with a dead-letter queue):
# the module's defaults (create_queue = true, fifo_queue = false).
provider "aws" {
  region = var.region
}

module "relay" {
  source = "../../modules/aws-relay"

  name            = var.name
  lambda_zip_path = "../../../target/lambda/relay-lambda/bootstrap.zip" # make lambda

  # Consumers can tell replicas apart by the callback path (payloads carry no replica).
  callback_path = "/?replica=aws"

  # Sustained non-2xx answers and dead letters notify these (an SNS topic, say).
  alarm_actions = var.alarm_actions
}
