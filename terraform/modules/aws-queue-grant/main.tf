# The subscriber's side of a cross-account relay: the relay's role may send to this queue, and
# only send. The relay's own policy (aws-relay) grants the same action on the same ARN; both are
# needed across accounts.
data "aws_iam_policy_document" "this" {
  source_policy_documents = var.source_policy_documents

  statement {
    sid       = "DssRelaySendOnly"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [var.queue_arn]

    principals {
      type        = "AWS"
      identifiers = var.relay_role_arns
    }
  }

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [var.queue_arn]

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
  queue_url = var.queue_url
  policy    = data.aws_iam_policy_document.this.json
}
