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

variable "alarm_actions" {
  description = "ARNs the relay's alarms notify (refused and failed answers, throttles, dead letters), e.g. an SNS topic with the operators' subscriptions. [] leaves the alarms in the console only."
  type        = list(string)
  default     = []
}

variable "route_writers" {
  description = "IAM role or user ARNs that may change the stored routes and manage split queues (the bucket policy lets them at the document; attach the route_writer_policy_json output to each as well), and replay from the archive (archive_readers; attach archive_reader_policy_json too). [] leaves both to the account's administrators."
  type        = list(string)
  default     = []
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

variable "relay_config" {
  description = "The relay's configuration file as TOML, for more than the DSS: [sources.<name>] for other senders (docs/sources.md), [[routes]] (docs/routing.md). The aws-relay module keeps it in a Secrets Manager secret the relay reads at start. null (the default): the DSS alone, to the example's queue."
  type        = string
  default     = null
}

variable "source_secret_arns" {
  description = "The Secrets Manager secrets relay_config's sources read their signing secrets from (secret_arn), by source name; the relay's role may read exactly these. {} (the default) for none."
  type        = map(string)
  default     = {}
}
