terraform {
  required_version = ">= 1.5.0"

  required_providers {
    # data.aws_iam_policy_document (source_policy_documents, principals, conditions) and
    # aws_sqs_queue_policy: every argument used is in 5.0.0, and 6.x changed none of them.
    aws = { source = "hashicorp/aws", version = ">= 5.0.0, < 7.0.0" }
  }
}
