variable "region" {
  description = "AWS region of the relay and of the subscriber's queue (the same region for both)."
  type        = string
  default     = "us-east-1"

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must be an AWS region such as us-east-1."
  }
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

variable "name" {
  description = "Name of the relay (Lambda function, role, log group, secret)."
  type        = string
  default     = "dss-relay-fifo"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.name))
    error_message = "name must be 1-48 letters, digits, hyphens or underscores."
  }
}

variable "subscriber_queue_name" {
  description = "Name of the subscriber's FIFO queue, without .fifo."
  type        = string
  default     = "dss-events"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,70}$", var.subscriber_queue_name))
    error_message = "subscriber_queue_name must be 1-70 letters, digits, hyphens or underscores."
  }
}

variable "lambda_zip_path" {
  description = "The zip `make lambda` builds, relative to this directory."
  type        = string
  default     = "../../../target/lambda/relay-lambda/bootstrap.zip"

  validation {
    condition     = endswith(var.lambda_zip_path, ".zip")
    error_message = "lambda_zip_path must point to a .zip file."
  }
}

variable "architecture" {
  description = "arm64, or x86_64 when `make lambda` said it built x86_64."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be \"arm64\" or \"x86_64\"."
  }
}
