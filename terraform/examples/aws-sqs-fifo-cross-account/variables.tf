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

