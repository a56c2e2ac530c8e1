locals {
  hmac_key_id = coalesce(var.hmac_key_id, var.name)
  # Ephemeral: neither the generated secret nor this value is written to the plan or the state.
  # ephemeral.random_password.hmac is opened on every run (count cannot branch on a sensitive
  # input) and draws a new value each time; only the value of the run that writes the secret
  # version (a new hmac_secret_version) is kept, in Secret Manager.
  hmac_secret = coalesce(var.hmac_secret, ephemeral.random_password.hmac.result)

  topic_id = var.create_topic ? google_pubsub_topic.this[0].id : var.existing_topic

  callback_url = "${trimsuffix(google_cloud_run_v2_service.this.uri, "/")}${var.callback_path}"

  # Every plain RELAY_* variable the container gets: the module's own, then extra_environment
  # (which may not name one of the module's). The HMAC keys and the archive's key are not among
  # them: they come from Secret Manager (below), as the configuration file does (a volume;
  # RELAY_CONFIG is its path).
  environment = merge(local.module_environment, var.extra_environment)
  module_environment = merge(
    {
      RELAY_PUBSUB_TOPIC        = local.topic_id
      RELAY_PUBSUB_ORDERING     = tostring(var.pubsub_ordering)
      RELAY_SINK_TIMEOUT_MS     = tostring(var.sink_timeout_ms)
      RELAY_MAX_CLOCK_SKEW_SECS = tostring(var.max_clock_skew_secs)
      RELAY_LOG_FORMAT          = var.log_format
      # One JSON line on standard output per answer and per publish, which Cloud Logging
      # parses into jsonPayload; the logs-based metrics in monitoring.tf read these lines.
      RELAY_METRICS = "emf"
    },
    # The configuration file (config.tf), mounted from Secret Manager.
    local.relay_config_enabled ? { RELAY_CONFIG = local.relay_config_path } : {},
    # The stored routes (routes.tf): read at start, then again at most every
    # routes_refresh_secs.
    var.routes_enabled ? {
      RELAY_ROUTES_URL          = local.routes_url
      RELAY_ROUTES_REFRESH_SECS = tostring(var.routes_refresh_secs)
    } : {},
    # The delivery ledger (ledger.tf).
    var.ledger_enabled ? {
      RELAY_LEDGER_URL            = local.ledger_url
      RELAY_LEDGER_RETENTION_SECS = tostring(var.ledger_retention_secs)
    } : {},
    # The archive (archive.tf); its key is a secret.
    var.archive_enabled ? {
      RELAY_ARCHIVE_URL            = local.archive_url
      RELAY_ARCHIVE_RETENTION_DAYS = tostring(var.archive_retention_days)
    } : {},
    local.archive_pubsub ? { RELAY_ARCHIVE_STREAM = local.archive_stream } : {},
  )
}

################################################################################
# HMAC key, in Secret Manager
################################################################################

ephemeral "random_password" "hmac" {
  length  = 48
  special = false
}

resource "google_secret_manager_secret" "hmac" {
  project   = var.project_id
  secret_id = "${var.name}-hmac-keys"
  labels    = var.labels

  replication {
    auto {}
  }
}

# RELAY_HMAC_KEYS: a JSON object {"<keyId>": "<secret>"}, in a write-only argument: Terraform
# sends it when the version is created and keeps only secret_data_wo_version in its state. A new
# hmac_secret_version replaces this version (secret_data_wo_version forces a new one), which is
# the only way to write another value.
resource "google_secret_manager_secret_version" "hmac" {
  secret                 = google_secret_manager_secret.hmac.id
  secret_data_wo         = jsonencode({ (local.hmac_key_id) = local.hmac_secret })
  secret_data_wo_version = var.hmac_secret_version

  # The running revision reads the old version until the service points at the new one.
  lifecycle {
    create_before_destroy = true
  }
}

################################################################################
# Pub/Sub topic
################################################################################

resource "google_pubsub_topic" "this" {
  count = var.create_topic ? 1 : 0

  project                    = var.project_id
  name                       = coalesce(var.topic_name, "${var.name}-events")
  kms_key_name               = var.topic_kms_key_name
  message_retention_duration = var.topic_message_retention_duration
  labels                     = var.labels
}

################################################################################
# Cloud Run service
################################################################################

resource "google_cloud_run_v2_service" "this" {
  project             = var.project_id
  name                = var.name
  location            = var.region
  description         = "Relays signed HCA DSS notifications to Pub/Sub."
  ingress             = "INGRESS_TRAFFIC_ALL"
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Public invocation without an allUsers binding (public_invocation, iam.tf): Cloud Run skips
  # the run.routes.invoke check for every caller.
  invoker_iam_disabled = var.public_invocation == "invoker_iam_disabled"

  template {
    service_account                  = google_service_account.this.email
    max_instance_request_concurrency = var.concurrency
    timeout                          = "${var.request_timeout_seconds}s"

    scaling {
      min_instance_count = var.min_instances
      max_instance_count = var.max_instances
    }

    # The configuration file (config.tf): the version written by this apply, as the file
    # relay.toml of the volume, which the container mounts at /etc/relay (RELAY_CONFIG).
    dynamic "volumes" {
      for_each = local.relay_config_enabled ? [google_secret_manager_secret_version.relay_config[0].version] : []
      content {
        name = "relay-config"

        secret {
          secret = google_secret_manager_secret.relay_config[0].secret_id

          items {
            path    = local.relay_config_file
            version = volumes.value
          }
        }
      }
    }

    containers {
      image = var.image

      # Cloud Run sets PORT; relay-gcf listens on 0.0.0.0:$PORT, so RELAY_LISTEN stays unset.
      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = var.cpu
          memory = var.memory
        }
        cpu_idle          = true
        startup_cpu_boost = true
      }

      env {
        name = "RELAY_HMAC_KEYS"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.hmac.secret_id
            version = google_secret_manager_secret_version.hmac.version
          }
        }
      }

      # Every plain RELAY_* variable (local.environment).
      dynamic "env" {
        for_each = local.environment
        content {
          name  = env.key
          value = env.value
        }
      }

      # The archive's key from Secret Manager, never as a plain value.
      dynamic "env" {
        for_each = var.archive_enabled ? {
          RELAY_ARCHIVE_KEY = google_secret_manager_secret_version.archive_key[0].version
        } : {}
        content {
          name = env.key
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.archive_key[0].secret_id
              version = env.value
            }
          }
        }
      }

      # The sources' secrets (source_secret_ids), each in the variable its source's secret_env
      # names, from the latest version of its secret when the instance starts.
      dynamic "env" {
        for_each = var.source_secret_ids
        content {
          name = env.key
          value_source {
            secret_key_ref {
              secret  = env.value
              version = "latest"
            }
          }
        }
      }

      dynamic "volume_mounts" {
        for_each = local.relay_config_enabled ? ["relay-config"] : []
        content {
          name       = volume_mounts.value
          mount_path = local.relay_config_dir
        }
      }

      # GET on any path answers 200 {"status":"ok"} once the configuration is valid and the
      # Pub/Sub client is built.
      startup_probe {
        http_get {
          path = "/"
        }
      }
    }
  }

  lifecycle {
    precondition {
      condition     = length(setintersection(keys(var.extra_environment), keys(local.module_environment))) == 0
      error_message = "extra_environment names settings the module sets itself (${join(", ", setintersection(keys(var.extra_environment), keys(local.module_environment)))}): set them through the module's own inputs."
    }
    precondition {
      condition     = var.sink_timeout_ms < var.request_timeout_seconds * 1000
      error_message = "sink_timeout_ms must be below request_timeout_seconds * 1000: the relay must answer within its sink deadline."
    }
    precondition {
      condition     = var.create_topic != (var.existing_topic != null)
      error_message = "Set either create_topic = true or existing_topic, exactly one."
    }
    precondition {
      condition     = var.archive_enabled || (var.archive_bucket_name == null && var.archive_location == null && var.archive_kms_key_name == null && length(var.archive_readers) == 0)
      error_message = "archive_bucket_name, archive_location, archive_kms_key_name and archive_readers take effect only with archive_enabled = true; set it, or leave them unset."
    }
    precondition {
      condition     = var.routes_enabled || (var.routes_bucket == null && var.split_prefix == null && length(var.route_writers) == 0)
      error_message = "routes_bucket, split_prefix and route_writers take effect only with routes_enabled = true; set it, or leave them unset."
    }
  }

  # The first request finds its secrets (the configuration file and the sources' too) and, with
  # the ledger, its grant and TTL policy in place; with the archive, its bucket and grant.
  depends_on = [
    google_secret_manager_secret_iam_member.relay,
    google_secret_manager_secret_iam_member.relay_config,
    google_secret_manager_secret_iam_member.source_secrets,
    google_project_iam_member.relay_ledger,
    google_firestore_field.ledger_expires_at,
    google_storage_bucket_iam_member.relay_archive,
    google_storage_bucket_iam_member.relay_archive_read,
    google_secret_manager_secret_iam_member.relay_archive_key,
  ]
}
