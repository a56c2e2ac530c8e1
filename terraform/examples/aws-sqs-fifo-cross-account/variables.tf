variable "region" {
  description = "AWS region of the relay and of the subscriber's queue (the same region for both)."
  type        = string
  default     = "us-east-1"
}

variable "relay_profile" {
  description = "AWS CLI profile of the account that runs the relay; null uses the default credential chain."
  type        = string
  default     = null
}

variable "subscriber_profile" {
  description = "AWS CLI profile of the subscriber's account, which owns the FIFO queue."
  type        = string

  validation {
    condition     = length(var.subscriber_profile) > 0
    error_message = "subscriber_profile must name a profile of the subscriber's account."
  }
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
