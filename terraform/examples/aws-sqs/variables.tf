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

variable "architecture" {
  description = "Instruction set of bootstrap.zip, arm64 or x86_64. null (the default) uses what `make lambda` built, which it records in target/lambda/relay-lambda/architecture."
  type        = string
  default     = null

  validation {
    condition     = var.architecture == null || try(contains(["arm64", "x86_64"], var.architecture), false)
    error_message = "architecture must be null, \"arm64\" or \"x86_64\"."
  }
}

variable "hmac_secret_version" {
  description = "Version of the HMAC secret in Secrets Manager: raise it to write a new generated secret (then register the DSS subscription again)."
  type        = number
  default     = 1
}
