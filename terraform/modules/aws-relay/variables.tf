################################################################################
# Naming
################################################################################

variable "name" {
  description = "Name of the relay: the Lambda function, its role and log group, the secret and (unless queue_name is set) the queue are named after it."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.name))
    error_message = "name must be 1-48 letters, digits, hyphens or underscores (it prefixes the Lambda, role, secret and queue names)."
  }
}

variable "tags" {
  description = "Tags added to every resource the module creates."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.tags : length(k) >= 1 && length(k) <= 128 && length(v) <= 256 && !startswith(lower(k), "aws:")])
    error_message = "Tag keys must be 1-128 characters and not start with aws:; values at most 256 characters."
  }
}

################################################################################
# Lambda function
################################################################################

variable "lambda_zip_path" {
  description = "Path to the bootstrap.zip that `make lambda` builds: <CARGO_TARGET_DIR or target>/lambda/relay-lambda/bootstrap.zip (the LAMBDA_ARCH one, arm64 by default), or lambda/<arm64|x86_64>/relay-lambda/bootstrap.zip for either architecture."
  type        = string

  validation {
    condition     = endswith(var.lambda_zip_path, ".zip")
    error_message = "lambda_zip_path must point to a .zip file (target/lambda/relay-lambda/bootstrap.zip)."
  }
}

variable "architecture" {
  description = "Instruction set of the bootstrap binary: arm64 or x86_64. null (the default) reads it from the file \"architecture\" that `make lambda` writes next to the zip, so the function always matches what was built; set it only for a zip built some other way."
  type        = string
  default     = null

  validation {
    condition     = var.architecture == null || try(contains(["arm64", "x86_64"], var.architecture), false)
    error_message = "architecture must be null, \"arm64\" or \"x86_64\"."
  }
}

variable "memory_size" {
  description = "Memory of the function in MB (CPU scales with it)."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240 && floor(var.memory_size) == var.memory_size
    error_message = "memory_size must be a whole number of MB between 128 and 10240."
  }
}

variable "timeout" {
  description = "Function timeout in seconds. Must stay above sink_timeout_ms: the relay answers within its sink deadline, never by a platform timeout."
  type        = number
  default     = 10

  validation {
    condition     = var.timeout >= 1 && var.timeout <= 900 && floor(var.timeout) == var.timeout
    error_message = "timeout must be a whole number of seconds between 1 and 900."
  }
}

variable "reserved_concurrency" {
  description = "Reserved concurrent executions for the function: caps how many requests it serves at once (each environment serves one), so that a flood on the public Function URL cannot take the account's whole Lambda concurrency from its other functions, and guarantees that capacity. Beyond it the Function URL answers 429 and the DSS retries (alarm <name>-throttles). The default, 200, absorbs a burst of 1,000 notifications within a second (README, \"Reserved concurrency\"); the account must keep 100 unreserved, so its concurrency quota must be at least this plus 100. null leaves the function on the account's unreserved pool, uncapped."
  type        = number
  default     = 200

  validation {
    condition     = var.reserved_concurrency == null || try(var.reserved_concurrency >= 0 && floor(var.reserved_concurrency) == var.reserved_concurrency, false)
    error_message = "reserved_concurrency must be null or a whole number >= 0 (0 stops all invocations)."
  }
}

variable "log_retention_days" {
  description = "Retention of the function's CloudWatch log group, in days."
  type        = number
  default     = 365

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of the values CloudWatch Logs accepts: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."
  }
}

variable "kms_key_arn" {
  description = "Customer-managed KMS key for the data the module creates: the secrets (HMAC keys, archive key, configuration file), the queue and its dead-letter queue, the log group, the function's environment and the ledger table. null keeps the AWS managed keys (aws/secretsmanager, SSE-SQS, CloudWatch Logs, aws/lambda and aws/dynamodb). When set, the role may use kms:Decrypt and kms:GenerateDataKey on this key, only through the services that use it (kms:ViaService), and the key policy must let CloudWatch Logs (logs.<region>.amazonaws.com) use it."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "kms_key_arn must be null or a KMS key ARN such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab."
  }
}

################################################################################
# Execution role (iam.tf)
################################################################################

variable "existing_role_arn" {
  description = "An execution role of your own for the function, instead of the one the module creates (<name>-relay): its trust policy must let lambda.amazonaws.com assume it, and its owner attaches the role_policy_json output to it (the exact grants the module would give its own role). null (the default) creates the role, with that policy inline."
  type        = string
  default     = null

  validation {
    condition     = var.existing_role_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", var.existing_role_arn))
    error_message = "existing_role_arn must be null or an IAM role ARN such as arn:aws:iam::123456789012:role/dss-relay."
  }
}

variable "role_path" {
  description = "Path of the execution role the module creates (\"/\", the default, or segments such as \"/relays/\"), for accounts whose policies or service control policies match roles by path. Not with existing_role_arn."
  type        = string
  default     = "/"

  validation {
    condition     = length(var.role_path) <= 512 && can(regex("^/([A-Za-z0-9+=,.@_-]+/)*$", var.role_path))
    error_message = "role_path must start and end with a slash, with segments of letters, digits and + = , . @ _ - between (at most 512 characters), such as \"/\" or \"/relays/\"."
  }
}

variable "permissions_boundary_arn" {
  description = "ARN of a managed policy set as the permissions boundary of the execution role the module creates, where the account requires one on every role. The boundary must allow everything the role's policy grants (role_policy_json), or the relay's calls are refused. null sets none. Not with existing_role_arn."
  type        = string
  default     = null

  validation {
    condition     = var.permissions_boundary_arn == null || can(regex("^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/[A-Za-z0-9+=,.@_/-]+$", var.permissions_boundary_arn))
    error_message = "permissions_boundary_arn must be null or a managed policy ARN such as arn:aws:iam::123456789012:policy/boundaries/relay."
  }
}

################################################################################
# Relay settings (RELAY_* environment variables)
################################################################################

variable "sink_timeout_ms" {
  description = "RELAY_SINK_TIMEOUT_MS: deadline for every sink to acknowledge, retries included; past it the DSS gets 503 and retries. Must be below timeout * 1000."
  type        = number
  default     = 5000

  validation {
    condition     = var.sink_timeout_ms >= 1 && var.sink_timeout_ms <= 60000 && floor(var.sink_timeout_ms) == var.sink_timeout_ms
    error_message = "sink_timeout_ms must be a whole number of milliseconds between 1 and 60000."
  }
}

variable "max_clock_skew_secs" {
  description = "RELAY_MAX_CLOCK_SKEW_SECS: largest accepted distance between a request's Date and the relay's clock; 0 turns the check off."
  type        = number
  default     = 300

  validation {
    condition     = var.max_clock_skew_secs >= 0 && floor(var.max_clock_skew_secs) == var.max_clock_skew_secs
    error_message = "max_clock_skew_secs must be a whole number of seconds >= 0."
  }
}

variable "log_format" {
  description = "RELAY_LOG_FORMAT: json or text."
  type        = string
  default     = "json"

  validation {
    condition     = contains(["json", "text"], var.log_format)
    error_message = "log_format must be \"json\" or \"text\"."
  }
}

################################################################################
# Configuration file (config.tf): RELAY_CONFIG
################################################################################

variable "relay_config" {
  description = "The relay's configuration file, as TOML text: [relay] settings, [sources.<name>] (other signature schemes than the DSS's), [sinks.<name>], [[routes]] and [[splits]] (docs/configuration.md, docs/sources.md). The module keeps it in a Secrets Manager secret (<name>-config-<suffix>, encrypted with kms_key_arn when set), lets the role read that secret, and sets RELAY_CONFIG to the secret's ARN: the relay reads it once at start, and a change reaches new execution environments (the function's description carries the secret's version, so Lambda replaces its environments). No secret in it (the module refuses hmac_keys, hmac_secret and archive_key keys): a source's secret goes in its own secret, named by secret_arn and listed in source_secret_arns. null (the default) sets no RELAY_CONFIG."
  type        = string
  default     = null

  validation {
    condition     = var.relay_config == null || try(length(trimspace(var.relay_config)) > 0 && length(var.relay_config) <= 65536, false)
    error_message = "relay_config must be null or a non-empty TOML document of at most 65536 characters (a Secrets Manager secret's size)."
  }

  validation {
    condition     = var.relay_config == null || !can(regex("(?m)^[ \\t]*(relay\\.)?\"?(hmac_keys|hmac_secret|archive_key)\"?[ \\t]*=", coalesce(var.relay_config, "-")))
    error_message = "relay_config must hold no secret: the module keeps the HMAC keys (hmac_secret) and the archive's key in secrets of their own, and a source's secret belongs in a secret named by secret_arn (source_secret_arns)."
  }
}

variable "source_secret_arns" {
  description = "The Secrets Manager secrets that relay_config's sources read their signing secrets from ([sources.<name>] secret_arn = \"…\"), by source name: the role may secretsmanager:GetSecretValue on exactly these ARNs (statement ReadSourceSecrets). Full ARNs, with the six characters Secrets Manager appends to the name. A secret in another account also needs a resource policy of its own that lets the role (role_arn) read it; one encrypted with a customer-managed key needs that key in source_secret_kms_key_arns. Needs relay_config. {} grants nothing."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for name, arn in var.source_secret_arns : can(regex("^[A-Za-z0-9_-]{1,64}$", name)) && can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$", arn))])
    error_message = "source_secret_arns must map source names (letters, digits, _ and -) to full secret ARNs such as arn:aws:secretsmanager:us-east-1:123456789012:secret:relay/github-AbCdEf (with the six-character suffix, no wildcards)."
  }

  validation {
    condition     = length(var.source_secret_arns) == 0 || var.relay_config != null
    error_message = "source_secret_arns needs relay_config: only its [sources.<name>] read these secrets."
  }
}

variable "source_secret_kms_key_arns" {
  description = "Customer-managed KMS keys that encrypt source_secret_arns, if any: the role may kms:Decrypt with these keys, only through Secrets Manager in the secrets' regions (statement DecryptSourceSecrets). The keys' policies must also allow the role (role_arn). [] for secrets encrypted with aws/secretsmanager or with kms_key_arn."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.source_secret_kms_key_arns : can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", arn))])
    error_message = "source_secret_kms_key_arns must be KMS key ARNs such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab."
  }

  validation {
    condition     = length(var.source_secret_kms_key_arns) == 0 || length(var.source_secret_arns) > 0
    error_message = "source_secret_kms_key_arns are the keys of source_secret_arns; set those too, or leave it []."
  }
}

################################################################################
# HMAC key (Secrets Manager)
################################################################################

variable "hmac_key_id" {
  description = "keyId the DSS signs with: the subscription's hmac_key_id. null uses the relay's name."
  type        = string
  default     = null

  validation {
    condition     = var.hmac_key_id == null || can(regex("^[A-Za-z0-9._:-]{1,128}$", var.hmac_key_id))
    error_message = "hmac_key_id must be null or 1-128 letters, digits, '.', '_', ':' or '-'."
  }
}

variable "hmac_secret" {
  description = "HMAC secret shared with the DSS (the subscription's hmac_secret_key). null generates a 48-character one with the ephemeral random_password. It is written to Secrets Manager through a write-only argument (never to the Terraform state) when hmac_secret_version changes, and never to the function's environment. A caller that passes it should declare its own variable ephemeral, or it lands in saved plan files."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.hmac_secret == null || can(regex("^[!-~]{32,256}$", var.hmac_secret))
    error_message = "hmac_secret must be null or 32-256 printable ASCII characters without spaces (the DSS uses its UTF-8 bytes)."
  }
}

variable "hmac_secret_version" {
  description = "Version of the HMAC secret written to Secrets Manager (secret_string_wo_version). The secret is written only when this number changes: raise it to store a new generated secret, or a new hmac_secret (the DSS subscription must then be registered again with the new secret)."
  type        = number
  default     = 1

  validation {
    condition     = var.hmac_secret_version >= 1 && floor(var.hmac_secret_version) == var.hmac_secret_version
    error_message = "hmac_secret_version must be a whole number >= 1."
  }
}

variable "secret_recovery_window_days" {
  description = "Days Secrets Manager keeps the HMAC secret after deletion (0 deletes it at once)."
  type        = number
  default     = 7

  validation {
    condition     = var.secret_recovery_window_days == 0 || (var.secret_recovery_window_days >= 7 && var.secret_recovery_window_days <= 30)
    error_message = "secret_recovery_window_days must be 0 or between 7 and 30."
  }
}

################################################################################
# SQS queue: created here, or an existing one
################################################################################

variable "create_queue" {
  description = "Create the SQS queue (with a dead-letter queue) that the relay publishes to. Set false to use existing_queue, or to publish only to SNS."
  type        = bool
  default     = true
}

variable "fifo_queue" {
  description = "Create a FIFO queue (name ending in .fifo). The relay then sets MessageGroupId = subscription_id and MessageDeduplicationId = its dedup key, so content-based deduplication stays off."
  type        = bool
  default     = false
}

variable "queue_name" {
  description = "Name of the created queue, without the .fifo suffix. null uses \"<name>-events\"."
  type        = string
  default     = null

  validation {
    condition     = var.queue_name == null || can(regex("^[A-Za-z0-9_-]{1,70}$", var.queue_name))
    error_message = "queue_name must be null or 1-70 letters, digits, hyphens or underscores (the module adds -dlq and .fifo)."
  }
}

variable "message_retention_seconds" {
  description = "How long the created queue keeps a message, in seconds (60 to 1209600, i.e. 14 days)."
  type        = number
  default     = 1209600

  validation {
    condition     = var.message_retention_seconds >= 60 && var.message_retention_seconds <= 1209600
    error_message = "message_retention_seconds must be between 60 and 1209600."
  }
}

variable "visibility_timeout_seconds" {
  description = "Visibility timeout of the created queue, in seconds: how long a consumer has to delete a message it received."
  type        = number
  default     = 60

  validation {
    condition     = var.visibility_timeout_seconds >= 0 && var.visibility_timeout_seconds <= 43200
    error_message = "visibility_timeout_seconds must be between 0 and 43200."
  }
}

variable "max_receive_count" {
  description = "Receives after which a message moves to the dead-letter queue (the redrive policy's maxReceiveCount)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count must be between 1 and 1000."
  }
}

variable "dlq_message_retention_seconds" {
  description = "How long the dead-letter queue keeps a message, in seconds. Keep it at least message_retention_seconds: SQS keeps a message's original enqueue time when it moves."
  type        = number
  default     = 1209600

  validation {
    condition     = var.dlq_message_retention_seconds >= 60 && var.dlq_message_retention_seconds <= 1209600
    error_message = "dlq_message_retention_seconds must be between 60 and 1209600."
  }
}

variable "queue_policy_documents" {
  description = "JSON IAM policy documents whose statements join the policy of the queue the module creates (create_queue), such as an Allow for a consumer in another account, or for an SNS topic that delivers to the queue. The module owns the policies of the queue and of its dead-letter queue (aws_sqs_queue_policy replaces a queue's whole policy), which refuse every request without TLS: put your statements here rather than in a policy of your own. [] adds none."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for doc in var.queue_policy_documents : can(jsondecode(doc).Statement)])
    error_message = "Each queue_policy_documents entry must be a JSON IAM policy with a Statement."
  }
}

variable "existing_queue" {
  description = "An existing queue to publish to instead of creating one (create_queue = false): its ARN and URL, and the customer-managed KMS key that encrypts it, if any (the role then may use kms:GenerateDataKey and kms:Decrypt on that key). A queue in another account also needs the aws-queue-grant module there."
  type = object({
    arn         = string
    url         = string
    kms_key_arn = optional(string)
  })
  default = null

  validation {
    condition = var.existing_queue == null || try(
      can(regex("^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,75}(\\.fifo)?$", var.existing_queue.arn)) &&
      can(regex("^https://[A-Za-z0-9.-]+/[0-9]{12}/[A-Za-z0-9_-]{1,75}(\\.fifo)?$", var.existing_queue.url)) &&
      endswith(var.existing_queue.arn, ".fifo") == endswith(var.existing_queue.url, ".fifo") &&
      element(split(":", var.existing_queue.arn), 5) == element(split("/", var.existing_queue.url), 4),
      false
    )
    error_message = "existing_queue needs arn (arn:aws:sqs:REGION:ACCOUNT:NAME) and url (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME) of the same queue."
  }

  validation {
    condition     = try(var.existing_queue.kms_key_arn, null) == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.existing_queue.kms_key_arn))
    error_message = "existing_queue.kms_key_arn must be null or a KMS key ARN."
  }
}

################################################################################
# SNS topic (optional second sink)
################################################################################

variable "sns_topic_arn" {
  description = "RELAY_SNS_TOPIC_ARN: also publish every notification to this SNS topic (the role may then sns:Publish to it, and only it). null publishes to the queue only."
  type        = string
  default     = null

  validation {
    condition     = var.sns_topic_arn == null || can(regex("^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\\.fifo)?$", var.sns_topic_arn))
    error_message = "sns_topic_arn must be null or a topic ARN such as arn:aws:sns:us-east-1:123456789012:dss-events."
  }
}

variable "sns_topic_kms_key_arn" {
  description = "The customer-managed KMS key that encrypts the sns_topic_arn topic, if any: the role then may use kms:GenerateDataKey and kms:Decrypt on that key, and only it (SNS needs both from a publisher to an encrypted topic). null for a topic without server-side encryption, with the AWS managed key alias/aws/sns, or encrypted with kms_key_arn. The key's policy must also allow the role (role_arn) these actions."
  type        = string
  default     = null

  validation {
    condition     = var.sns_topic_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.sns_topic_kms_key_arn))
    error_message = "sns_topic_kms_key_arn must be null or a KMS key ARN such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab."
  }
}

################################################################################
# DSS subscription
################################################################################

variable "callback_path" {
  description = "Path and query appended to the Function URL to form the subscription's callback_url, e.g. \"/\" or \"/?replica=aws\" (every path reaches the relay)."
  type        = string
  default     = "/"

  validation {
    condition     = startswith(var.callback_path, "/") && !can(regex("[\\s#]", var.callback_path))
    error_message = "callback_path must start with / and contain no whitespace or fragment."
  }
}

################################################################################
# Alarms
################################################################################

variable "alarms_enabled" {
  description = "Create the CloudWatch alarms, on the relay's answers by code at the DSS's retry pace (answers that need an operator, bad signatures, sustained 503s), on requests refused after their signature verified, on the function's errors and throttles, on messages in the dead-letter queue (with create_queue), on notifications still undelivered after an hour (with ledger_enabled), on metric lines the relay dropped, and on archive records its delivery stream could not write to the bucket (with archive_firehose)."
  type        = bool
  default     = true
}

variable "alarm_actions" {
  description = "ARNs notified when an alarm fires and when it clears, typically an SNS topic with the operators' subscriptions. [] creates the alarms without notifying anyone (they still show in the CloudWatch console)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.alarm_actions : can(regex("^arn:aws[a-z-]*:[a-z0-9-]+:", arn))])
    error_message = "alarm_actions must be ARNs (arn:aws:sns:<region>:<account>:<topic>, …)."
  }
}

variable "alarm_bad_signature_minutes" {
  description = "Minutes, among the alarms' last 30, with at least one 401 answer (a signature problem: bad_signature, unknown_key_id, stale_date, …) before the <name>-bad-signatures alarm fires. The default, 2, catches the DSS retrying a notification signed with another secret (v1 after 1 minute, v2 after 15) and lets a scanner's one-off request pass; raise it if scanners of the public URL page you."
  type        = number
  default     = 2

  validation {
    condition     = var.alarm_bad_signature_minutes >= 1 && var.alarm_bad_signature_minutes <= 30 && floor(var.alarm_bad_signature_minutes) == var.alarm_bad_signature_minutes
    error_message = "alarm_bad_signature_minutes must be a whole number from 1 to 30 (the alarm's window is 30 one-minute data points)."
  }
}

variable "alarm_unavailable_minutes" {
  description = "Minutes, among the alarms' last 30, with at least one 503 answer (sink_unavailable, ledger_unavailable, overloaded, deadline_passed) before the <name>-sustained-503 alarm fires. The default, 2: an outage that a DSS retry ran into, not a blip within one minute."
  type        = number
  default     = 2

  validation {
    condition     = var.alarm_unavailable_minutes >= 1 && var.alarm_unavailable_minutes <= 30 && floor(var.alarm_unavailable_minutes) == var.alarm_unavailable_minutes
    error_message = "alarm_unavailable_minutes must be a whole number from 1 to 30 (the alarm's window is 30 one-minute data points)."
  }
}

variable "alarm_undelivered_threshold" {
  description = "Notifications first received more than an hour earlier with a destination that has not acknowledged them, counted in one hour (the relay's metric Undelivered), from which the <name>-undelivered alarm fires (with ledger_enabled). The default, 1: any."
  type        = number
  default     = 1

  validation {
    condition     = var.alarm_undelivered_threshold >= 1 && floor(var.alarm_undelivered_threshold) == var.alarm_undelivered_threshold
    error_message = "alarm_undelivered_threshold must be a whole number >= 1."
  }
}

################################################################################
# Dashboard (dashboard.tf)
################################################################################

variable "dashboard_enabled" {
  description = "Create the CloudWatch dashboard <name>: answers by class and by status and code, latency, publishes, publish latency and batch size per destination, duplicates, ledger latency and undelivered notifications (with ledger_enabled), replays (with archive_enabled), metric lines dropped, dead letters (with create_queue), and the function's concurrency, throttles, errors and duration."
  type        = bool
  default     = true
}

################################################################################
# Live routes and splits (routes.tf): RELAY_ROUTES_URL, RELAY_ROUTES_REFRESH_SECS
################################################################################

variable "routes_enabled" {
  description = "Give the relay a stored routes document: an S3 object (routes_bucket, or a bucket created here) that every instance reads at start and again at most every routes_refresh_secs (RELAY_ROUTES_URL, RELAY_ROUTES_REFRESH_SECS), which route_writers change with `relay routes` and `relay split`. The role may then read that one object and send to the split destinations named <split_prefix>*. false sets neither variable and creates nothing."
  type        = bool
  default     = false
}

variable "routes_bucket" {
  description = "An existing S3 bucket, in the function's region, to keep the routes document in. null (the default) creates one (with routes_enabled): versioned, encrypted, private, TLS only. The module changes nothing on an existing bucket: its owner lets route_writers in (route_writer_policy_json lists what they need)."
  type        = string
  default     = null

  validation {
    condition     = var.routes_bucket == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.routes_bucket))
    error_message = "routes_bucket must be null or an S3 bucket name: 3-63 lowercase letters, digits, dots or hyphens, starting and ending with a letter or digit."
  }
}

variable "routes_bucket_kms_key_arn" {
  description = "The customer-managed KMS key that encrypts the existing routes_bucket, if any: the role then may use kms:Decrypt and kms:GenerateDataKey on it, and route_writer_policy_json names it. null for a bucket with SSE-S3 or the AWS managed key. A bucket created here uses kms_key_arn instead."
  type        = string
  default     = null

  validation {
    condition     = var.routes_bucket_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.routes_bucket_kms_key_arn))
    error_message = "routes_bucket_kms_key_arn must be null or a KMS key ARN such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab."
  }
}

variable "routes_key" {
  description = "Key of the routes document in the bucket. The object need not exist: a missing object means no stored routes, and the first `relay routes put` or `relay split start` creates it."
  type        = string
  default     = "routes.toml"

  validation {
    condition     = length(var.routes_key) <= 1024 && can(regex("^[A-Za-z0-9!_.'()-]+(/[A-Za-z0-9!_.'()-]+)*$", var.routes_key))
    error_message = "routes_key must be an object key of at most 1024 characters: letters, digits and ! _ . ' ( ) -, in segments separated by single slashes (no leading or trailing slash, no * or ?, which IAM reads as wildcards)."
  }
}

variable "routes_refresh_secs" {
  description = "RELAY_ROUTES_REFRESH_SECS: how often, at most, an instance reads the routes document again (a conditional GetObject on its ETag); on Lambda, at the start of an invocation once this much time has passed. It bounds how long a change takes to reach every instance."
  type        = number
  default     = 10

  validation {
    condition     = var.routes_refresh_secs >= 1 && var.routes_refresh_secs <= 3600 && floor(var.routes_refresh_secs) == var.routes_refresh_secs
    error_message = "routes_refresh_secs must be a whole number of seconds between 1 and 3600."
  }
}

variable "routes_noncurrent_version_days" {
  description = "Days the created bucket keeps a replaced version of the routes document (versioning keeps every write, so an earlier document can be restored) before it expires."
  type        = number
  default     = 90

  validation {
    condition     = var.routes_noncurrent_version_days >= 1 && var.routes_noncurrent_version_days <= 3650 && floor(var.routes_noncurrent_version_days) == var.routes_noncurrent_version_days
    error_message = "routes_noncurrent_version_days must be a whole number of days between 1 and 3650."
  }
}

variable "routes_force_destroy" {
  description = "Let terraform destroy delete the created routes bucket with every version of the document in it. false (the default) refuses to destroy a bucket that holds any."
  type        = bool
  default     = false
}

variable "split_prefix" {
  description = "Name prefix of the split destinations: `relay split start --create` names the queue it creates <split_prefix><split name>-<suffix>, and the role may sqs:SendMessage to queues and sns:Publish to topics whose names start with it, in this account and region. null uses \"<name>-split-\"."
  type        = string
  default     = null

  validation {
    # The role may send to every queue and topic named <split_prefix>*: at least 4 characters
    # ending in a hyphen keep that to the split destinations (a prefix "d" would grant "d*").
    condition     = var.split_prefix == null || (can(regex("^[A-Za-z0-9_-]{3,59}-$", var.split_prefix)) && can(regex("^[A-Za-z0-9]", var.split_prefix)) && length(regexall("[A-Za-z0-9]", coalesce(var.split_prefix, "-"))) >= 3)
    error_message = "split_prefix must be null or 4-60 letters, digits, hyphens or underscores, starting with a letter or digit, holding at least three, and ending in a hyphen, such as \"dss-relay-split-\" (the role may send to every queue and topic whose name starts with it; SQS queue names are at most 80 characters, and the split's name and a suffix follow the prefix)."
  }
}

variable "route_writers" {
  description = "IAM roles and users (ARNs, in this account or another) that change the routes document and manage split queues. On a bucket created here, its policy lets them read and write the document; each also needs route_writer_policy_json attached to it by its account's administrators (a role in another account needs both). [] lets no one in through the bucket policy."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.route_writers : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]+$", arn))])
    error_message = "route_writers must be IAM role or user ARNs such as arn:aws:iam::123456789012:role/relay-developers."
  }
}

variable "stored_sink_queue_arns" {
  description = "SQS queues (ARNs) that stored routes' [sinks.<name>] may send to besides the relay's own queue and the <split_prefix>* split queues: the role may sqs:SendMessage to exactly these (statement SendToStoredSinkQueues). A queue in another account also needs its owner's queue policy (the aws-queue-grant module there), and one encrypted with a customer-managed key its key in stored_sink_kms_key_arns. Needs routes_enabled."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.stored_sink_queue_arns : can(regex("^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,75}(\\.fifo)?$", arn))])
    error_message = "stored_sink_queue_arns must be queue ARNs such as arn:aws:sqs:us-east-1:123456789012:dss-audit (no wildcards)."
  }

  validation {
    condition     = length(var.stored_sink_queue_arns) == 0 || var.routes_enabled
    error_message = "stored_sink_queue_arns needs routes_enabled = true: only stored routes name these queues."
  }
}

variable "stored_sink_topic_arns" {
  description = "SNS topics (ARNs) that stored routes' [sinks.<name>] may publish to besides sns_topic_arn and the <split_prefix>* split topics: the role may sns:Publish to exactly these (statement PublishToStoredSinkTopics). A topic in another account also needs its owner's topic policy, and one encrypted with a customer-managed key its key in stored_sink_kms_key_arns. Needs routes_enabled."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.stored_sink_topic_arns : can(regex("^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\\.fifo)?$", arn))])
    error_message = "stored_sink_topic_arns must be topic ARNs such as arn:aws:sns:us-east-1:123456789012:dss-audit (no wildcards)."
  }

  validation {
    condition     = length(var.stored_sink_topic_arns) == 0 || var.routes_enabled
    error_message = "stored_sink_topic_arns needs routes_enabled = true: only stored routes name these topics."
  }
}

variable "stored_sink_kms_key_arns" {
  description = "Customer-managed KMS keys that encrypt stored_sink_queue_arns and stored_sink_topic_arns, if any: the role then may use kms:GenerateDataKey and kms:Decrypt on these keys too (SQS and SNS need both from a sender to an encrypted queue or topic; statement UseCustomerManagedKeys). The keys' policies must also allow the role (role_arn). [] for destinations with SSE-SQS or the AWS managed keys. Needs routes_enabled."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.stored_sink_kms_key_arns : can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", arn))])
    error_message = "stored_sink_kms_key_arns must be KMS key ARNs such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab."
  }

  validation {
    condition     = length(var.stored_sink_kms_key_arns) == 0 || var.routes_enabled
    error_message = "stored_sink_kms_key_arns needs routes_enabled = true."
  }
}

################################################################################
# Delivery ledger (ledger.tf): RELAY_LEDGER_URL, RELAY_LEDGER_RETENTION_SECS
################################################################################

variable "ledger_enabled" {
  description = "Give the relay a delivery ledger: a DynamoDB table (on-demand, keyed by bundle_uuid and ledger_key, no index, TTL on expires_at, encrypted) in which it records, per notification, which destinations acknowledged it and with which message id, so that a DSS retry publishes only to the destinations that have not, a notification every destination acknowledged is answered 202 \"duplicate\" without publishing, and two attempts on two instances never both publish to one destination. Sets RELAY_LEDGER_URL = dynamodb://<table> and RELAY_LEDGER_RETENTION_SECS; the role may then dynamodb:UpdateItem and dynamodb:PutItem on that table, and nothing else on it. `relay trace BUNDLE_UUID` reads it (ledger_url, ledger_reader_policy_json). false creates no table and sets neither variable: every attempt publishes, as without a ledger."
  type        = bool
  default     = true
}

variable "ledger_table_name" {
  description = "Name of the ledger table. null uses \"<name>-ledger\"."
  type        = string
  default     = null

  validation {
    condition     = var.ledger_table_name == null || can(regex("^[A-Za-z0-9_.-]{3,255}$", var.ledger_table_name))
    error_message = "ledger_table_name must be null or a DynamoDB table name: 3-255 letters, digits, '_', '.' or '-'."
  }
}

variable "ledger_retention_secs" {
  description = "RELAY_LEDGER_RETENTION_SECS: how long a notification's record is kept after its last attempt, in seconds (each write sets expires_at to now plus this, and the table's TTL deletes the item after it). Keep it above the DSS's retry span (v1 retries for 7 days): a retry after the record is gone is published again. The default, 691200, is 8 days."
  type        = number
  default     = 691200

  validation {
    condition     = var.ledger_retention_secs * 1000 > var.sink_timeout_ms + 2000 && floor(var.ledger_retention_secs) == var.ledger_retention_secs
    error_message = "ledger_retention_secs must be a whole number of seconds longer than an attempt's lease (sink_timeout_ms plus 2 s): an entry that expires sooner lets a second attempt publish at the same time."
  }
}

variable "ledger_deletion_protection" {
  description = "Deletion protection of the ledger table (deletion_protection_enabled): DynamoDB refuses to delete it, so terraform destroy, or a change that replaces the table, fails until false has been applied. The table holds which destinations acknowledged each notification of the last ledger_retention_secs: without it, every DSS retry publishes again."
  type        = bool
  default     = true
}

variable "ledger_point_in_time_recovery" {
  description = "Point-in-time recovery of the ledger table (continuous backups for the last 35 days, billed per GB-month of table size). false: a table deleted or overwritten by mistake cannot be restored, and the notifications it held may be published again on their next retry."
  type        = bool
  default     = true
}

################################################################################
# Archive (archive.tf): RELAY_ARCHIVE_URL
################################################################################

variable "archive_enabled" {
  description = "Give the relay an archive: an S3 bucket created here, holding every verified notification's sealed record under <archive_prefix>YYYY/MM/DD/HH/ (through Firehose with archive_firehose, the default), so that operators can replay from it with `relay replay` after the DSS gave up. Sets RELAY_ARCHIVE_URL = s3://<bucket>/<archive_prefix>; the role may s3:PutObject under the prefix (with If-None-Match: *, for the records it writes itself: the bucket's policy refuses the role's PutObject without it, so it never overwrites) and GetObject there, and nothing else on the bucket. archive_readers read it (archive_reader_policy_json). false creates no bucket and sets no variable."
  type        = bool
  default     = true
}

variable "archive_firehose" {
  description = "Write the archive through an Amazon Data Firehose delivery stream created here, <name>-archive (RELAY_ARCHIVE_STREAM): the relay hands it each record (PutRecord, PutRecordBatch; the role may call those on this stream only) and answers once Firehose holds it, and Firehose writes the buffered records as objects under <archive_prefix>YYYY/MM/DD/HH/, a few per buffering interval, with a role of its own that may only create objects under the prefix. At about $0.03 per GB of 5 KB-rounded records, a million notifications cost about $0.15, against $5 of PutObject calls when the relay writes one object per notification (false: the relay writes the objects itself, one per record or per batch of records queued together). A record larger than Firehose takes (1,000 KiB) is written by the relay as an object of its own either way."
  type        = bool
  default     = true
}

variable "archive_firehose_buffer_seconds" {
  description = "How long Firehose buffers records before it writes them as an object (60 to 900 seconds; or once 5 MiB are buffered): the lag before `relay replay` and `relay events` see a record, against the number of objects (about one per interval)."
  type        = number
  default     = 300

  validation {
    condition     = var.archive_firehose_buffer_seconds >= 60 && var.archive_firehose_buffer_seconds <= 900 && floor(var.archive_firehose_buffer_seconds) == var.archive_firehose_buffer_seconds
    error_message = "archive_firehose_buffer_seconds must be a whole number of seconds from 60 to 900."
  }
}

variable "archive_bucket_name" {
  description = "Name of the archive bucket created here. null uses \"<name>-archive-<account id>-<region>\" (the name lowercased, its other characters than letters, digits and hyphens made hyphens, cut to 27 characters), unique per account and region and at most 63 characters."
  type        = string
  default     = null

  validation {
    condition     = var.archive_bucket_name == null || (can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.archive_bucket_name)) && !can(regex("\\.\\.", var.archive_bucket_name)))
    error_message = "archive_bucket_name must be null or an S3 bucket name: 3-63 lowercase letters, digits, dots or hyphens, starting and ending with a letter or digit, without two dots in a row."
  }
}

variable "archive_prefix" {
  description = "Key prefix of the archive's objects in the bucket: segments each ending in a slash, such as \"notifications/\". The role may write, archive_readers read and list, and the lifecycle rule expires only objects under it."
  type        = string
  default     = "notifications/"

  validation {
    condition     = length(var.archive_prefix) <= 512 && can(regex("^([A-Za-z0-9!_.'()-]+/)+$", var.archive_prefix))
    error_message = "archive_prefix must be at most 512 characters of one or more segments each ending in a slash (letters, digits and ! _ . ' ( ) -; no * or ?, which IAM reads as wildcards), such as \"notifications/\"."
  }
}

variable "archive_retention_days" {
  description = "Days after which the bucket's lifecycle rule expires an archived notification (objects under archive_prefix): how far back `relay replay` can reach. Keep it above the DSS's retry span (v1 retries for 7 days) and the time an operator needs to notice an undelivered notification."
  type        = number
  default     = 30

  validation {
    condition     = var.archive_retention_days >= 1 && floor(var.archive_retention_days) == var.archive_retention_days
    error_message = "archive_retention_days must be a whole number of days >= 1."
  }
}

variable "archive_force_destroy" {
  description = "Let terraform destroy delete the archive bucket with every archived notification in it. false (the default) refuses to destroy a bucket that holds any: the archive is what `relay replay` sends from after the DSS gave up."
  type        = bool
  default     = false
}

variable "archive_kms_key_arn" {
  description = "Customer-managed KMS key that encrypts the archive bucket (SSE-KMS, with an S3 bucket key). null (the default) uses SSE-S3 (AES256). When set, the role may kms:GenerateDataKey on this key (to write), archive_reader_policy_json adds kms:Decrypt on it (to read), and the key policy must allow both."
  type        = string
  default     = null

  validation {
    condition     = var.archive_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.archive_kms_key_arn))
    error_message = "archive_kms_key_arn must be null or a KMS key ARN such as arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab."
  }
}

variable "archive_readers" {
  description = "IAM principals (ARNs of roles, users or accounts, in this account or another) that replay from the archive with `relay replay`: the bucket policy lets them s3:GetObject under archive_prefix and s3:ListBucket the prefix, and nothing else. Each also needs archive_reader_policy_json attached by its account's administrators (a principal in another account needs both). [] lets no one in through the bucket policy."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.archive_readers : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(root|(role|user)/[A-Za-z0-9+=,.@_/-]+)$", arn))])
    error_message = "archive_readers must be IAM role, user or account ARNs such as arn:aws:iam::123456789012:role/relay-operators."
  }
}

variable "extra_environment" {
  description = "More RELAY_* settings for the relay, by name (docs/configuration.md lists every one), such as RELAY_MAX_BODY_BYTES, RELAY_LEDGER_KEY or RELAY_WARM_CONNECTIONS. Only RELAY_* names; none the module sets itself (it refuses them at plan); never RELAY_CONFIG (the module owns it: relay_config); and no secret (RELAY_HMAC_KEYS, RELAY_HMAC_SECRET, RELAY_ARCHIVE_KEY: the module keeps those in Secrets Manager). {} adds nothing."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for name in keys(var.extra_environment) : startswith(name, "RELAY_") && !contains(["RELAY_HMAC_KEYS", "RELAY_HMAC_SECRET", "RELAY_ARCHIVE_KEY", "RELAY_CONFIG"], name)])
    error_message = "extra_environment takes RELAY_* settings only, no secret (RELAY_HMAC_KEYS, RELAY_HMAC_SECRET, RELAY_ARCHIVE_KEY), and not RELAY_CONFIG (set relay_config: the module keeps the file in a secret and grants reading it)."
  }
}

variable "tracing_mode" {
  description = "The function's X-Ray tracing (tracing_config): \"PassThrough\" (Lambda's default) gives each invocation the caller's trace id, if any, and records nothing; \"Active\" samples and records the function's segments, and the role may then xray:PutTraceSegments and xray:PutTelemetryRecords (X-Ray bills traces recorded beyond its free tier). Either way the relay passes the trace on to its messages: AWSTraceHeader on SQS, traceparent on SNS."
  type        = string
  default     = "PassThrough"

  validation {
    condition     = contains(["PassThrough", "Active"], var.tracing_mode)
    error_message = "tracing_mode must be \"PassThrough\" or \"Active\"."
  }
}
