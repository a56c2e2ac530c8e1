variable "queue_url" {
  description = "URL of the subscriber's queue (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)."
  type        = string

  validation {
    condition     = can(regex("^https://[A-Za-z0-9.-]+/[0-9]{12}/[A-Za-z0-9_-]{1,75}(\\.fifo)?$", var.queue_url))
    error_message = "queue_url must be a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/dss-events."
  }
}

variable "queue_arn" {
  description = "ARN of the same queue (arn:aws:sqs:REGION:ACCOUNT:NAME)."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,75}(\\.fifo)?$", var.queue_arn))
    error_message = "queue_arn must be a queue ARN such as arn:aws:sqs:us-east-1:123456789012:dss-events."
  }
}

variable "relay_role_arns" {
  description = "Execution role ARNs of the relays allowed to send (the aws-relay module's role_arn output)."
  type        = list(string)

  validation {
    condition     = length(var.relay_role_arns) > 0 && alltrue([for arn in var.relay_role_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", arn))])
    error_message = "relay_role_arns must list one or more IAM role ARNs such as arn:aws:iam::123456789012:role/dss-relay-relay."
  }
}

variable "source_policy_documents" {
  description = "JSON policy documents whose statements the queue policy keeps. aws_sqs_queue_policy replaces the queue's whole policy, so pass the statements the queue already has here."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for doc in var.source_policy_documents : can(jsondecode(doc).Statement)])
    error_message = "Each source policy document must be a JSON IAM policy with a Statement."
  }
}
