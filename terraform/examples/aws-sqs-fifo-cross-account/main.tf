# The relay runs in one account; the subscriber's FIFO queue lives in another. The relay's role
# may sqs:SendMessage to that queue (aws-relay), and the queue's policy lets that role send, and
# only send (aws-queue-grant, applied with the subscriber's credentials).
provider "aws" {
  region  = var.region
  profile = var.relay_profile
}

provider "aws" {
  alias   = "subscriber"
  region  = var.region
  profile = var.subscriber_profile
}

################################################################################
# Subscriber's account: the FIFO queue (stands in for a queue the subscriber already has)
################################################################################

resource "aws_sqs_queue" "subscriber_dlq" {
  provider = aws.subscriber

  name                      = "dss-events-dlq.fifo"
  fifo_queue                = true
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
}

resource "aws_sqs_queue" "subscriber" {
  provider = aws.subscriber

  name       = "dss-events.fifo"
  fifo_queue = true
  # The relay sets MessageGroupId (subscription_id) and MessageDeduplicationId (its dedup key).
  content_based_deduplication = false
  message_retention_seconds   = 1209600
  visibility_timeout_seconds  = 60
  sqs_managed_sse_enabled     = true
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.subscriber_dlq.arn
    maxReceiveCount     = 5
  })
}

################################################################################
# Relay's account: the relay, publishing to the subscriber's queue
################################################################################

module "relay" {
  source = "../../modules/aws-relay"

  name            = "dss-relay-fifo"
  lambda_zip_path = var.lambda_zip_path # make lambda
  # 200 by default; an account whose concurrency quota is under 300 needs less, or null.
  reserved_concurrency = var.reserved_concurrency
  callback_path        = "/?replica=aws"

  create_queue   = false
  existing_queue = { arn = aws_sqs_queue.subscriber.arn, url = aws_sqs_queue.subscriber.url }

  # The delivery ledger, in the relay's account: FIFO deduplication forgets a message id after
  # 5 minutes, the ledger remembers each notification for 8 days after its last attempt.
  ledger_enabled = true

  # The archive, for `relay replay`, in the relay's account.
  archive_enabled = true
}

################################################################################
# Subscriber's account: let the relay's role send, and only send
################################################################################

module "queue_grant" {
  source    = "../../modules/aws-queue-grant"
  providers = { aws = aws.subscriber }

  queue_url       = aws_sqs_queue.subscriber.url
  queue_arn       = aws_sqs_queue.subscriber.arn
  relay_role_arns = [module.relay.role_arn]
}
