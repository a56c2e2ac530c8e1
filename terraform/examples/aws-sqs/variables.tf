variable "region" {
  description = "AWS region of the relay and its queue. The DSS notifies from us-east-1."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Name of the relay (Lambda function, role, log group, secret, queue \"<name>-events\")."
  type        = string
  default     = "dss-relay"
}

