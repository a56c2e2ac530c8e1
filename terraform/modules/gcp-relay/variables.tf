################################################################################
# Project and naming
################################################################################

variable "project_id" {
  description = "Project that runs the relay: the Cloud Run service, its service account, the HMAC secret and (when created) the topic."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID: 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region of the Cloud Run service, e.g. us-east1 (the DSS notifies from AWS us-east-1)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Cloud Run region such as us-east1 or europe-west4."
  }
}

variable "name" {
  description = "Name of the Cloud Run service; the service account (relay-<name>), the secret and (unless topic_name is set) the topic are named after it."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,22}[a-z0-9])?$", var.name))
    error_message = "name must be 1-24 lowercase letters, digits or hyphens, start with a letter and not end with a hyphen."
  }
}

variable "labels" {
  description = "Labels added to every resource the module creates that takes labels."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "Label keys must be 1-63 lowercase letters, digits, _ or - starting with a letter; values at most 63 of the same."
  }
}

################################################################################
# Cloud Run service
################################################################################

variable "image" {
  description = "The relay-gcf container image (infra/docker/Dockerfile: the gcp-relay-image module's image output, or `make image`), e.g. us-east1-docker.pkg.dev/PROJECT/REPO/relay-gcf:TAG or @sha256:DIGEST."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/[A-Za-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$", var.image))
    error_message = "image must be a full image reference with a registry and a tag or digest, e.g. us-east1-docker.pkg.dev/my-project/relay/relay-gcf:0.1.0."
  }
}

variable "concurrency" {
  description = "Requests one instance serves at once (max_instance_request_concurrency). Notifications in flight together share SQS/SNS calls, and Pub/Sub's client batches on its own."
  type        = number
  default     = 80

  validation {
    condition     = var.concurrency >= 1 && var.concurrency <= 1000 && floor(var.concurrency) == var.concurrency
    error_message = "concurrency must be a whole number between 1 and 1000."
  }
}

variable "max_instances" {
  description = "Most instances Cloud Run may start: caps cost and the publish rate."
  type        = number
  default     = 10

  validation {
    condition     = var.max_instances >= 1 && var.max_instances <= 1000 && floor(var.max_instances) == var.max_instances
    error_message = "max_instances must be a whole number between 1 and 1000."
  }
}

variable "min_instances" {
  description = "Instances kept warm (0 scales to zero; the first request then waits for a cold start)."
  type        = number
  default     = 0

  validation {
    condition     = var.min_instances >= 0 && var.min_instances <= 100 && floor(var.min_instances) == var.min_instances
    error_message = "min_instances must be a whole number between 0 and 100."
  }
}

variable "cpu" {
  description = "CPU limit of the container, e.g. \"1\" or \"2\"."
  type        = string
  default     = "1"

  validation {
    condition     = contains(["1", "2", "4", "6", "8"], var.cpu)
    error_message = "cpu must be \"1\", \"2\", \"4\", \"6\" or \"8\"."
  }
}

variable "memory" {
  description = "Memory limit of the container, e.g. \"512Mi\" or \"1Gi\"."
  type        = string
  default     = "512Mi"

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi)$", var.memory))
    error_message = "memory must be a quantity in Mi or Gi, e.g. 512Mi."
  }
}

variable "request_timeout_seconds" {
  description = "Cloud Run request timeout, in seconds. Must stay above sink_timeout_ms: the relay answers within its sink deadline."
  type        = number
  default     = 30

  validation {
    condition     = var.request_timeout_seconds >= 1 && var.request_timeout_seconds <= 3600 && floor(var.request_timeout_seconds) == var.request_timeout_seconds
    error_message = "request_timeout_seconds must be a whole number between 1 and 3600."
  }
}

variable "deletion_protection" {
  description = "Refuse to destroy the Cloud Run service through Terraform, and let Firestore refuse to delete the ledger database created here (delete_protection_state). Set false and apply before terraform destroy."
  type        = bool
  default     = true
}

variable "public_invocation" {
  description = "How the service accepts unauthenticated calls (the DSS cannot present a Google identity): \"allusers_binding\" grants allUsers roles/run.invoker on the service; \"invoker_iam_disabled\" sets invoker_iam_disabled on the service and grants nothing, which is the way that works where an organisation policy enforces domain-restricted sharing (an allUsers member is refused there). Disabling the check needs run.services.setIamPolicy (roles/run.admin)."
  type        = string
  default     = "allusers_binding"

  validation {
    condition     = contains(["allusers_binding", "invoker_iam_disabled"], var.public_invocation)
    error_message = "public_invocation must be \"allusers_binding\" or \"invoker_iam_disabled\"."
  }
}

################################################################################
# Relay settings (RELAY_* environment variables)
################################################################################

variable "sink_timeout_ms" {
  description = "RELAY_SINK_TIMEOUT_MS: deadline for every sink to acknowledge, retries included; past it the DSS gets 503 and retries."
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
  description = "RELAY_LOG_FORMAT: json (Cloud Logging parses it) or text."
  type        = string
  default     = "json"

  validation {
    condition     = contains(["json", "text"], var.log_format)
    error_message = "log_format must be \"json\" or \"text\"."
  }
}

variable "pubsub_ordering" {
  description = "RELAY_PUBSUB_ORDERING: publish with match.bundle_uuid as ordering key (subscriptions must enable message ordering for it to matter)."
  type        = bool
  default     = false
}

################################################################################
# Configuration file (config.tf): RELAY_CONFIG
################################################################################

variable "relay_config" {
  description = "The relay's configuration file, as TOML text: [relay] settings, [sources.<name>] (other signature schemes than the DSS's), [sinks.<name>], [[routes]] and [[splits]] (docs/configuration.md, docs/sources.md). The module keeps it in a Secret Manager secret (<name>-config), grants the service account roles/secretmanager.secretAccessor on that secret, mounts the version it wrote into the container as the file /etc/relay/relay.toml and sets RELAY_CONFIG to that path; a change writes a new version and rolls out a revision that reads it. No secret in it (the module refuses hmac_keys, hmac_secret and archive_key keys): a source's secret reaches the container as an environment variable from Secret Manager (source_secret_ids), which the source names with secret_env. null (the default) sets no RELAY_CONFIG."
  type        = string
  default     = null

  validation {
    condition     = var.relay_config == null || try(length(trimspace(var.relay_config)) > 0 && length(var.relay_config) <= 65536, false)
    error_message = "relay_config must be null or a non-empty TOML document of at most 65536 characters (a Secret Manager version holds at most 64 KiB)."
  }

  validation {
    condition     = var.relay_config == null || !can(regex("(?m)^[ \\t]*(relay\\.)?\"?(hmac_keys|hmac_secret|archive_key)\"?[ \\t]*=", coalesce(var.relay_config, "-")))
    error_message = "relay_config must hold no secret: the module keeps the HMAC keys (hmac_secret) and the archive's key in secrets of their own, and a source's secret belongs in a Secret Manager secret given to the container through source_secret_ids (secret_env)."
  }
}

variable "source_secret_ids" {
  description = "Secrets of relay_config's sources, by the environment variable that carries each into the container: { GITHUB_WEBHOOK_SECRET = \"github-webhook-secret\" } sets GITHUB_WEBHOOK_SECRET from the latest version of that Secret Manager secret (an id in project_id, or projects/P/secrets/S), for a source with secret_env = \"GITHUB_WEBHOOK_SECRET\". The service account gets roles/secretmanager.secretAccessor on exactly these secrets, which needs secretmanager.secrets.setIamPolicy on them for whoever applies. Instances read a secret when they start: a new version reaches the instances started after it, and every instance with the next revision. Not RELAY_* names (the module's), nor PORT, K_SERVICE, K_REVISION or K_CONFIGURATION (Cloud Run's). Needs relay_config. {} sets none."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for name, id in var.source_secret_ids : can(regex("^[A-Z_][A-Z0-9_]{0,127}$", name)) && !startswith(name, "RELAY_") && !contains(["PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"], name)])
    error_message = "source_secret_ids takes environment variable names (uppercase letters, digits and _, not starting with a digit), none RELAY_* (the module's settings) nor PORT, K_SERVICE, K_REVISION or K_CONFIGURATION (set by Cloud Run)."
  }

  validation {
    condition     = alltrue([for name, id in var.source_secret_ids : can(regex("^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/secrets/)?[A-Za-z0-9_-]{1,255}$", id))])
    error_message = "source_secret_ids values must be Secret Manager secret ids (in project_id) or names projects/PROJECT/secrets/SECRET."
  }

  validation {
    condition     = length(var.source_secret_ids) == 0 || var.relay_config != null
    error_message = "source_secret_ids needs relay_config: only its [sources.<name>] read these variables (secret_env)."
  }
}

################################################################################
# HMAC key (Secret Manager)
################################################################################

variable "hmac_key_id" {
  description = "keyId the DSS signs with: the subscription's hmac_key_id. null uses the service name."
  type        = string
  default     = null

  validation {
    condition     = var.hmac_key_id == null || can(regex("^[A-Za-z0-9._:-]{1,128}$", var.hmac_key_id))
    error_message = "hmac_key_id must be null or 1-128 letters, digits, '.', '_', ':' or '-'."
  }
}

variable "hmac_secret" {
  description = "HMAC secret shared with the DSS (the subscription's hmac_secret_key). null generates a 48-character one with the ephemeral random_password. It is written to Secret Manager through a write-only argument (never to the Terraform state) when hmac_secret_version changes, and reaches the container as RELAY_HMAC_KEYS from Secret Manager, never as a plain value. A caller that passes it should declare its own variable ephemeral, or it lands in saved plan files."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.hmac_secret == null || can(regex("^[!-~]{32,256}$", var.hmac_secret))
    error_message = "hmac_secret must be null or 32-256 printable ASCII characters without spaces (the DSS uses its UTF-8 bytes)."
  }
}

variable "hmac_secret_version" {
  description = "Version of the HMAC secret written to Secret Manager (secret_data_wo_version). The secret is written only when this number changes: raise it to store a new generated secret, or a new hmac_secret, in a new secret version (the previous version is deleted, and the DSS subscription must then be registered again with the new secret)."
  type        = number
  default     = 1

  validation {
    condition     = var.hmac_secret_version >= 1 && floor(var.hmac_secret_version) == var.hmac_secret_version
    error_message = "hmac_secret_version must be a whole number >= 1."
  }
}

################################################################################
# Pub/Sub topic: created here, or an existing one
################################################################################

variable "create_topic" {
  description = "Create the Pub/Sub topic in project_id and let the relay publish to it. Set false to publish to existing_topic instead, whose owner grants roles/pubsub.publisher with the gcp-topic-grant module."
  type        = bool
  default     = true
}

variable "topic_name" {
  description = "Name of the created topic. null uses \"<name>-events\"."
  type        = string
  default     = null

  validation {
    condition     = var.topic_name == null || can(regex("^[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.topic_name))
    error_message = "topic_name must be null or 3-255 characters starting with a letter (letters, digits, . _ ~ % + -)."
  }
}

variable "topic_kms_key_name" {
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) that encrypts the created topic's messages, and the archive's topic's (archive_pubsub); null uses Google-managed encryption. The Pub/Sub service agent needs roles/cloudkms.cryptoKeyEncrypterDecrypter on it."
  type        = string
  default     = null

  validation {
    condition     = var.topic_kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.topic_kms_key_name))
    error_message = "topic_kms_key_name must be null or projects/P/locations/L/keyRings/R/cryptoKeys/K."
  }
}

variable "topic_message_retention_duration" {
  description = "How long the created topic retains messages for replay, e.g. \"86400s\" (10 minutes to 31 days); null keeps none beyond the subscriptions'."
  type        = string
  default     = null

  validation {
    condition     = var.topic_message_retention_duration == null || can(regex("^[0-9]+s$", var.topic_message_retention_duration))
    error_message = "topic_message_retention_duration must be null or a number of seconds such as \"86400s\"."
  }
}

variable "existing_topic" {
  description = "RELAY_PUBSUB_TOPIC of an existing topic (projects/PROJECT/topics/TOPIC), used when create_topic = false."
  type        = string
  default     = null

  validation {
    condition     = var.existing_topic == null || can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.existing_topic))
    error_message = "existing_topic must be null or projects/PROJECT/topics/TOPIC."
  }
}

################################################################################
# DSS subscription
################################################################################

variable "callback_path" {
  description = "Path and query appended to the service URL to form the subscription's callback_url, e.g. \"/\" or \"/?replica=gcp\" (every path reaches the relay)."
  type        = string
  default     = "/"

  validation {
    condition     = startswith(var.callback_path, "/") && !can(regex("[\\s#]", var.callback_path))
    error_message = "callback_path must start with / and contain no whitespace or fragment."
  }
}

################################################################################
# Alerts (monitoring.tf)
################################################################################

variable "alerts_enabled" {
  description = "Whether the alert policies open incidents and notify. false keeps the policies, disabled; the logs-based metrics are recorded either way."
  type        = bool
  default     = true
}

variable "alert_notification_channels" {
  description = "Cloud Monitoring notification channels the alert policies notify, as projects/PROJECT/notificationChannels/ID. Empty: incidents are opened in Cloud Monitoring and notify no one."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.alert_notification_channels : can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]+$", c))])
    error_message = "Each alert_notification_channels entry must be projects/PROJECT/notificationChannels/ID (a numeric ID)."
  }
}

variable "bad_signature_threshold" {
  description = "401 answers (signature problems: bad_signature, unknown_key_id, stale_date, …) within 30 minutes above which the bad_signature alert opens an incident. The default, 1, catches the DSS retrying a notification signed with another secret (two attempts in the window: v1 after 1 minute, v2 after 15) and lets a scanner's one-off request pass; raise it if scanners of the public URL page you."
  type        = number
  default     = 1

  validation {
    condition     = var.bad_signature_threshold >= 0 && floor(var.bad_signature_threshold) == var.bad_signature_threshold
    error_message = "bad_signature_threshold must be a whole number of answers >= 0."
  }
}

variable "unavailable_threshold" {
  description = "503 answers (sink_unavailable, ledger_unavailable, overloaded, deadline_passed) within 30 minutes above which the unavailable alert opens an incident. The default, 1: an outage that a DSS retry ran into, not a single 503. A busy relay may raise it: a short blip then gives many 503s at once."
  type        = number
  default     = 1

  validation {
    condition     = var.unavailable_threshold >= 0 && floor(var.unavailable_threshold) == var.unavailable_threshold
    error_message = "unavailable_threshold must be a whole number of answers >= 0."
  }
}

variable "undelivered_threshold" {
  description = "Notifications within an hour above which the undelivered alert opens an incident (with ledger_enabled): notifications the relay first received more than an hour earlier and that a destination has still not acknowledged (the relay's metric Undelivered, logs-based metric <name>/undelivered). The default, 0: any."
  type        = number
  default     = 0

  validation {
    condition     = var.undelivered_threshold >= 0 && floor(var.undelivered_threshold) == var.undelivered_threshold
    error_message = "undelivered_threshold must be a whole number of notifications >= 0."
  }
}

variable "dead_letter_subscriptions" {
  description = "Subscription IDs (not full names) in project_id that receive dead-lettered notifications, i.e. the subscriptions of dead-letter topics of the relay's consumers. Any message waiting in one for 5 minutes opens an incident; empty creates no dead-letter alert."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.dead_letter_subscriptions : can(regex("^[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", s)) && !startswith(lower(s), "goog")])
    error_message = "Each dead_letter_subscriptions entry must be a subscription ID: 3-255 characters starting with a letter (letters, digits, . _ ~ % + -), not starting with goog."
  }
}

################################################################################
# Dashboard (dashboard.tf)
################################################################################

variable "dashboard_enabled" {
  description = "Create the Cloud Monitoring dashboard \"<name> relay\": answers by class and by status and code, answer latency, publish latency and batch size per destination, duplicates, ledger latency and undelivered notifications (with ledger_enabled), metric lines dropped, dead letters (with dead_letter_subscriptions), and Cloud Run's instances and requests by response class."
  type        = bool
  default     = true
}

################################################################################
# Live routes and splits (routes.tf): RELAY_ROUTES_URL, RELAY_ROUTES_REFRESH_SECS
################################################################################

variable "routes_enabled" {
  description = "Give the relay a stored routes document: a Cloud Storage object (in routes_bucket, or a bucket created here) that every instance reads at start and again at most every routes_refresh_secs (RELAY_ROUTES_URL, RELAY_ROUTES_REFRESH_SECS), which route_writers change with `relay routes` and `relay split`. The service account may then read that one object, and route_writers write it. false sets neither variable and creates nothing."
  type        = bool
  default     = false
}

variable "routes_bucket" {
  description = "An existing Cloud Storage bucket, with uniform bucket-level access (IAM conditions need it), to keep the routes document in; the module adds its two object-scoped grants to it. null (the default) creates one (with routes_enabled) in project_id and region: versioned, uniform access, public access prevention enforced."
  type        = string
  default     = null

  validation {
    condition     = var.routes_bucket == null || can(regex("^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$", var.routes_bucket))
    error_message = "routes_bucket must be null or a bucket name: 3-63 lowercase letters, digits, _ . or -, starting and ending with a letter or digit."
  }
}

variable "routes_object" {
  description = "Name of the routes document in the bucket. The object need not exist: a missing object means no stored routes, and the first `relay routes put` or `relay split start` creates it."
  type        = string
  default     = "routes.toml"

  validation {
    condition     = length(var.routes_object) <= 1024 && can(regex("^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$", var.routes_object))
    error_message = "routes_object must be an object name of at most 1024 characters: letters, digits, _ . -, in segments separated by single slashes (it is written into an IAM condition, so no quotes or other characters)."
  }
}

variable "routes_refresh_secs" {
  description = "RELAY_ROUTES_REFRESH_SECS: how often, at most, an instance reads the routes document again (a get conditional on the generation it has). It bounds how long a change takes to reach every instance."
  type        = number
  default     = 10

  validation {
    condition     = var.routes_refresh_secs >= 1 && var.routes_refresh_secs <= 3600 && floor(var.routes_refresh_secs) == var.routes_refresh_secs
    error_message = "routes_refresh_secs must be a whole number of seconds between 1 and 3600."
  }
}

variable "routes_noncurrent_version_days" {
  description = "Days the created bucket keeps a replaced generation of the routes document (versioning keeps every write, so an earlier document can be restored) before deleting it."
  type        = number
  default     = 90

  validation {
    condition     = var.routes_noncurrent_version_days >= 1 && var.routes_noncurrent_version_days <= 3650 && floor(var.routes_noncurrent_version_days) == var.routes_noncurrent_version_days
    error_message = "routes_noncurrent_version_days must be a whole number of days between 1 and 3650."
  }
}

variable "routes_force_destroy" {
  description = "Let terraform destroy delete the created routes bucket with every generation of the document in it. false (the default) refuses to destroy a bucket that holds any."
  type        = bool
  default     = false
}

variable "split_prefix" {
  description = "Name prefix of the split topics and pull subscriptions `relay split start --create` makes in project_id (<split_prefix><split name>-<suffix>). Pub/Sub grants cannot be limited to a name prefix, so nothing is granted on it here: see the README, \"Live routes and splits\". null uses \"<name>-split-\"."
  type        = string
  default     = null

  validation {
    condition     = var.split_prefix == null || (can(regex("^[A-Za-z][A-Za-z0-9._~%+-]{0,199}$", var.split_prefix)) && !startswith(lower(var.split_prefix), "goog"))
    error_message = "split_prefix must be null or 1-200 characters starting with a letter (letters, digits, . _ ~ % + -), not starting with goog."
  }
}

variable "route_writers" {
  description = "Who changes the routes document, as IAM members: \"user:<email>\", \"group:<email>\" or \"serviceAccount:<email>\". Each gets roles/storage.objectUser on the bucket, conditioned on the one object. Creating split topics needs project-level Pub/Sub rights the module does not grant (README, \"Live routes and splits\")."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.route_writers : can(regex("^(user|group|serviceAccount):[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$", m))])
    error_message = "route_writers must be IAM members such as user:alice@example.org, group:relay-developers@example.org or serviceAccount:ci@my-project.iam.gserviceaccount.com."
  }
}

variable "stored_sink_topics" {
  description = "Pub/Sub topics (projects/PROJECT/topics/TOPIC) that stored routes' [sinks.<name>] may publish to besides the relay's own topic: the service account gets roles/pubsub.publisher on exactly each of these topics (google_pubsub_topic_iam_member.stored_sinks), which needs pubsub.topics.setIamPolicy on them for whoever applies (a topic in another project: there, or its owner grants it with gcp-topic-grant instead and leaves it out here). Needs routes_enabled."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for t in var.stored_sink_topics : can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", t))])
    error_message = "stored_sink_topics must be topic ids such as projects/my-project/topics/dss-audit."
  }

  validation {
    condition     = length(var.stored_sink_topics) == 0 || var.routes_enabled
    error_message = "stored_sink_topics needs routes_enabled = true: only stored routes name these topics."
  }
}

################################################################################
# Delivery ledger (ledger.tf): RELAY_LEDGER_URL, RELAY_LEDGER_RETENTION_SECS
################################################################################

variable "ledger_enabled" {
  description = "Give the relay a delivery ledger: a Firestore collection (in a Native-mode database created here, or an existing one) in which it records, per notification, which destinations acknowledged it and with which message id, so that a DSS retry publishes only to the destinations that have not, a notification every destination acknowledged is answered 202 \"duplicate\" without publishing, and two attempts on two instances never both publish to one destination. Sets RELAY_LEDGER_URL = firestore://<project_id>/<ledger_database>/<ledger_collection> and RELAY_LEDGER_RETENTION_SECS, adds a TTL policy on the collection's expires_at, and grants the service account roles/datastore.user conditioned on that one database. `relay trace BUNDLE_UUID` reads it (ledger_url). false creates nothing and sets neither variable: every attempt publishes, as without a ledger. Needs the Firestore API (firestore.googleapis.com) enabled in project_id."
  type        = bool
  default     = true
}

variable "ledger_create_database" {
  description = "Create the ledger's Firestore database (Native mode, Standard edition) named ledger_database in project_id, at ledger_location. false uses an existing database of that id in project_id, which must be in Native mode; the module then adds only the TTL policy and the grant."
  type        = bool
  default     = true
}

variable "ledger_database" {
  description = "Id of the ledger's Firestore database in project_id: created with ledger_create_database, else an existing one (\"(default)\" for the project's default database)."
  type        = string
  default     = "relay-ledger"

  validation {
    condition     = var.ledger_database == "(default)" || (can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.ledger_database)) && !can(regex("^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", var.ledger_database)))
    error_message = "ledger_database must be \"(default)\" or a Firestore database id: 4-63 lowercase letters, digits or hyphens, starting with a letter, ending with a letter or digit, and not shaped like a UUID."
  }
}

variable "ledger_location" {
  description = "Location of the created ledger database: a Firestore region (us-east1, europe-west4, …) or multi-region (nam5, eur3). null uses region, next to the service. A database's location cannot change."
  type        = string
  default     = null

  validation {
    condition     = var.ledger_location == null || can(regex("^([a-z]+-[a-z]+[0-9]+|nam[0-9]+|eur[0-9]+)$", var.ledger_location))
    error_message = "ledger_location must be null, a region such as us-east1, or a multi-region such as nam5 or eur3."
  }
}

variable "ledger_collection" {
  description = "Collection of the ledger's documents (one per notification, id = its ledger key) in ledger_database; the TTL policy is set on its field expires_at."
  type        = string
  default     = "deliveries"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,100}$", var.ledger_collection)) && !can(regex("^__.*__$", var.ledger_collection))
    error_message = "ledger_collection must be 1-100 letters, digits, '_' or '-' (it is the last segment of RELAY_LEDGER_URL), and not of the reserved form __name__."
  }
}

variable "ledger_retention_secs" {
  description = "RELAY_LEDGER_RETENTION_SECS: how long a notification's record is kept after its last attempt, in seconds (each write sets expires_at to now plus this, and the TTL policy deletes the document after it). Keep it above the DSS's retry span (v1 retries for 7 days): a retry after the record is gone is published again. The default, 691200, is 8 days."
  type        = number
  default     = 691200

  validation {
    condition     = var.ledger_retention_secs * 1000 > var.sink_timeout_ms + 2000 && floor(var.ledger_retention_secs) == var.ledger_retention_secs
    error_message = "ledger_retention_secs must be a whole number of seconds longer than an attempt's lease (sink_timeout_ms plus 2 s): an entry that expires sooner lets a second attempt publish at the same time."
  }
}

variable "ledger_point_in_time_recovery" {
  description = "Point-in-time recovery of the created ledger database (reads and restores of any minute of the last 7 days, billed as storage). false keeps Firestore's default: versions of the last hour only."
  type        = bool
  default     = true
}

################################################################################
# Archive (archive.tf): RELAY_ARCHIVE_URL
################################################################################

variable "archive_enabled" {
  description = "Give the relay an archive: a Cloud Storage bucket created here, in which it writes every verified notification, alone as the object <archive_prefix>YYYY/MM/DD/HH/<dedup key>, or with the records queued behind a write as the lines of one object <archive_prefix>YYYY/MM/DD/HH/batch-<id> (application/json), with ifGenerationMatch=0 (it never overwrites, and takes 412 as already written), so that operators can replay from it with `relay replay` after the DSS gave up. Sets RELAY_ARCHIVE_URL = gs://<bucket>/<archive_prefix>; the service account gets roles/storage.objectCreator on the bucket, conditioned on the prefix (create only: no read, no overwrite, no delete). archive_readers read it. false creates no bucket and sets no variable."
  type        = bool
  default     = true
}

variable "archive_pubsub" {
  description = "Write the archive through Pub/Sub (RELAY_ARCHIVE_STREAM = pubsub://<topic>): the relay publishes each sealed record to a topic created here, <name>-archive, and a Cloud Storage subscription of it writes the records it received as objects of lines under <archive_prefix>YYYY/MM/DD/hh/mm_ss_<id>, one every archive_pubsub_max_duration_secs or 5 MiB, instead of the relay writing an object per notification: about $0.28 a million 1 KB notifications, written and kept 30 days, against $5.04. The relay answers 2xx once Pub/Sub holds the record. Needs archive_enabled. false: the relay writes its objects itself."
  type        = bool
  default     = true
}

variable "archive_pubsub_max_duration_secs" {
  description = "How long the archive's Cloud Storage subscription writes one object before it starts the next (max_duration, 60 to 600 seconds; it also closes one at 5 MiB): how long a record waits before `relay replay` can read it."
  type        = number
  default     = 300

  validation {
    condition     = var.archive_pubsub_max_duration_secs >= 60 && var.archive_pubsub_max_duration_secs <= 600 && floor(var.archive_pubsub_max_duration_secs) == var.archive_pubsub_max_duration_secs
    error_message = "archive_pubsub_max_duration_secs must be a whole number of seconds from 60 to 600."
  }
}

variable "archive_bucket_name" {
  description = "Name of the archive bucket created here. null uses \"<project_id>-<name>-archive\" (at most 63 characters)."
  type        = string
  default     = null

  validation {
    condition     = var.archive_bucket_name == null || (can(regex("^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$", var.archive_bucket_name)) && !startswith(var.archive_bucket_name, "goog") && !strcontains(var.archive_bucket_name, "google"))
    error_message = "archive_bucket_name must be null or a Cloud Storage bucket name without dots: 3-63 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit, not starting with goog nor containing google."
  }
}

variable "archive_prefix" {
  description = "Name prefix of the archive's objects in the bucket: segments each ending in a slash, such as \"notifications/\". The service account's grant and the lifecycle rule reach only objects under it."
  type        = string
  default     = "notifications/"

  validation {
    condition     = length(var.archive_prefix) <= 512 && can(regex("^([A-Za-z0-9!_.'()-]+/)+$", var.archive_prefix))
    error_message = "archive_prefix must be at most 512 characters of one or more segments each ending in a slash (letters, digits and ! _ . ' ( ) -), such as \"notifications/\"."
  }
}

variable "archive_retention_days" {
  description = "Days after which the bucket's lifecycle rule deletes an archived notification (objects under archive_prefix): how far back `relay replay` can reach. Keep it above the DSS's retry span (v1 retries for 7 days) and the time an operator needs to notice an undelivered notification."
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

variable "archive_location" {
  description = "Location of the archive bucket: a region (us-east1), a dual-region (NAM4) or a multi-region (US). null uses region, next to the service. A bucket's location cannot change."
  type        = string
  default     = null

  validation {
    condition     = var.archive_location == null || can(regex("^([a-z]+-[a-z]+[0-9]+|[A-Za-z]{2,4}[0-9]*)$", var.archive_location))
    error_message = "archive_location must be null, a region such as us-east1, a dual-region such as NAM4 or a multi-region such as US."
  }
}

variable "archive_kms_key_name" {
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) that encrypts the archive's objects by default (CMEK); null uses Google-managed encryption. The Cloud Storage service agent of project_id needs roles/cloudkms.cryptoKeyEncrypterDecrypter on it; the relay and the readers need nothing on the key."
  type        = string
  default     = null

  validation {
    condition     = var.archive_kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", var.archive_kms_key_name))
    error_message = "archive_kms_key_name must be null or projects/P/locations/L/keyRings/R/cryptoKeys/K."
  }
}

variable "archive_readers" {
  description = "Who replays from the archive with `relay replay`, as IAM members: \"user:<email>\", \"group:<email>\" or \"serviceAccount:<email>\". Each gets roles/storage.objectViewer (list and read) on the archive bucket, roles/secretmanager.secretAccessor on the archive's key and, with create_topic, roles/pubsub.publisher on the relay's topic; replaying also needs the ledger's grant, and a split's or an existing topic's own."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.archive_readers : can(regex("^(user|group|serviceAccount):[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$", m))])
    error_message = "archive_readers must be IAM members such as user:alice@example.org, group:relay-operators@example.org or serviceAccount:ops@my-project.iam.gserviceaccount.com."
  }
}

variable "extra_environment" {
  description = "More RELAY_* settings for the relay, by name (docs/configuration.md lists every one), such as RELAY_MAX_BODY_BYTES, RELAY_LEDGER_KEY or RELAY_WARM_CONNECTIONS. Only RELAY_* names; none the module sets itself (it refuses them at plan); never RELAY_CONFIG (the module owns it: relay_config); and no secret (RELAY_HMAC_KEYS, RELAY_HMAC_SECRET, RELAY_ARCHIVE_KEY: the module keeps those in Secret Manager). {} adds nothing."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for name in keys(var.extra_environment) : startswith(name, "RELAY_") && !contains(["RELAY_HMAC_KEYS", "RELAY_HMAC_SECRET", "RELAY_ARCHIVE_KEY", "RELAY_CONFIG"], name)])
    error_message = "extra_environment takes RELAY_* settings only, no secret (RELAY_HMAC_KEYS, RELAY_HMAC_SECRET, RELAY_ARCHIVE_KEY), and not RELAY_CONFIG (set relay_config: the module keeps the file in a secret and mounts it)."
  }
}
