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

variable "lambda_zip_path" {
  description = "The relay's bootstrap.zip, from this directory. The default is the zip `make lambda` builds without CARGO_TARGET_DIR (arm64). With CARGO_TARGET_DIR set, `make lambda` writes under it instead: pass \"$CARGO_TARGET_DIR/lambda/relay-lambda/bootstrap.zip\" (e.g. TF_VAR_lambda_zip_path). For x86_64, pass .../lambda/x86_64/relay-lambda/bootstrap.zip. The function's architecture is read from the file \"architecture\" next to the zip."
  type        = string
  default     = "../../../target/lambda/relay-lambda/bootstrap.zip"
}

variable "reserved_concurrency" {
  description = "Reserved concurrent executions for the function (the aws-relay README, \"Reserved concurrency\"). The default, 200, needs an account concurrency quota of at least 300 (new accounts often have 10): lower it, or null to leave the function on the account's unreserved pool, where the quota is lower."
  type        = number
  default     = 200
}
