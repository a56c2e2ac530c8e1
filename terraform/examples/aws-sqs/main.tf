# A relay in one account publishing to a standard SQS queue it creates (with a dead-letter queue).
provider "aws" {
  region = var.region
}

module "relay" {
  source = "../../modules/aws-relay"

  name            = var.name
  lambda_zip_path = var.lambda_zip_path
  architecture    = var.architecture

  # Consumers can tell replicas apart by the callback path (payloads carry no replica).
  callback_path = "/?replica=aws"

  create_queue = true
  fifo_queue   = false
}
