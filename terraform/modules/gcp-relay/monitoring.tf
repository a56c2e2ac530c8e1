################################################################################
# Logs-based metrics, from the relay's metric lines
################################################################################

# With RELAY_METRICS=emf (main.tf) the relay prints one JSON line to standard output per answer
# and per publish; Cloud Logging parses each into jsonPayload:
#
#   answer:  {"Relay":…,"Status":"202","Class":"2xx","Code":"published","Answers":1,"Latency":3.2,…}
#   publish: {"Relay":…,"Sink":"pubsub:projects/P/topics/T","Result":"ok","Publishes":1,
#             "PublishLatency":2.1,"BatchSize":7,…}
#
# Answers marks an answer line, Publishes a publish line; BatchSize is only on a publish that
# succeeded. Latencies are in milliseconds. The metrics are named <name>/…, and appear in Cloud
# Monitoring as logging.googleapis.com/user/<name>/….
locals {
  metric_lines = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${var.name}\"",
    "logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Fstdout\"",
  ])

  # Latencies in ms: bounds 0.25 × 2^i, i = 0…19, i.e. 0.25 ms to about 131 s, past the longest
  # sink_timeout_ms (60 s). Batch sizes: 1 to 2048 messages.
  latency_buckets = { num_finite_buckets = 19, growth_factor = 2, scale = 0.25 }
  batch_buckets   = { num_finite_buckets = 11, growth_factor = 2, scale = 1 }
}

resource "google_logging_metric" "answers" {
  project     = var.project_id
  name        = "${var.name}/answers"
  description = "Answers of the ${var.name} relay, by HTTP status, status class and code (published, filtered, or the error code): one per request the relay answered."
  filter      = "${local.metric_lines} AND jsonPayload.Answers:*"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name}: answers"

    labels {
      key         = "status"
      value_type  = "STRING"
      description = "HTTP status of the answer, e.g. 202, 401, 502, 503."
    }
    labels {
      key         = "class"
      value_type  = "STRING"
      description = "Status class: 2xx, 4xx or 5xx."
    }
    labels {
      key         = "code"
      value_type  = "STRING"
      description = "published, filtered, ok, or the error code of the answer (README, \"How a request is answered\")."
    }
  }

  label_extractors = {
    status = "EXTRACT(jsonPayload.Status)"
    class  = "EXTRACT(jsonPayload.Class)"
    code   = "EXTRACT(jsonPayload.Code)"
  }
}

resource "google_logging_metric" "answer_latency" {
  project         = var.project_id
  name            = "${var.name}/answer_latency"
  description     = "Time the ${var.name} relay took to answer a request, in milliseconds, by status class."
  filter          = "${local.metric_lines} AND jsonPayload.Answers:*"
  value_extractor = "EXTRACT(jsonPayload.Latency)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "ms"
    display_name = "${var.name}: answer latency"

    labels {
      key         = "class"
      value_type  = "STRING"
      description = "Status class of the answer: 2xx, 4xx or 5xx."
    }
  }

  label_extractors = {
    class = "EXTRACT(jsonPayload.Class)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = local.latency_buckets.num_finite_buckets
      growth_factor      = local.latency_buckets.growth_factor
      scale              = local.latency_buckets.scale
    }
  }
}

resource "google_logging_metric" "publish_latency" {
  project         = var.project_id
  name            = "${var.name}/publish_latency"
  description     = "Time a sink of the ${var.name} relay took to answer a publish, in milliseconds, by sink and result (ok, retryable, permanent)."
  filter          = "${local.metric_lines} AND jsonPayload.Publishes:*"
  value_extractor = "EXTRACT(jsonPayload.PublishLatency)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "ms"
    display_name = "${var.name}: publish latency"

    labels {
      key         = "sink"
      value_type  = "STRING"
      description = "The sink, e.g. pubsub:projects/P/topics/T."
    }
    labels {
      key         = "result"
      value_type  = "STRING"
      description = "ok; retryable (the DSS gets 503 and retries); permanent (the DSS gets 502)."
    }
  }

  label_extractors = {
    sink   = "EXTRACT(jsonPayload.Sink)"
    result = "EXTRACT(jsonPayload.Result)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = local.latency_buckets.num_finite_buckets
      growth_factor      = local.latency_buckets.growth_factor
      scale              = local.latency_buckets.scale
    }
  }
}

resource "google_logging_metric" "batch_size" {
  project         = var.project_id
  name            = "${var.name}/batch_size"
  description     = "Messages in the batch that carried a successful publish of the ${var.name} relay, by sink: how much the relay's publishes share calls."
  filter          = "${local.metric_lines} AND jsonPayload.BatchSize:*"
  value_extractor = "EXTRACT(jsonPayload.BatchSize)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "1"
    display_name = "${var.name}: publish batch size"

    labels {
      key         = "sink"
      value_type  = "STRING"
      description = "The sink, e.g. pubsub:projects/P/topics/T."
    }
  }

  label_extractors = {
    sink = "EXTRACT(jsonPayload.Sink)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = local.batch_buckets.num_finite_buckets
      growth_factor      = local.batch_buckets.growth_factor
      scale              = local.batch_buckets.scale
    }
  }
}

################################################################################
# Alert: the DSS is getting answers other than 2xx
################################################################################

# On Cloud Run's own request count rather than the relay's lines: it also counts what Cloud Run
# answers without reaching the relay (no instance available, a crashing revision).
#
# The rate is taken per minute and summed over the service's revisions; the condition holds
# while that rate stays above non_2xx_threshold (per second) for non_2xx_duration_seconds. The
# defaults (above 0, for 600 s) open an incident when every minute for ten minutes had at least
# one non-2xx answer: a quiet relay whose every notification fails, retried by the DSS about
# once a minute, alerts after ten minutes, while a single failure, or a scanner's short burst of
# 404s and 401s on the public URL, does not.
resource "google_monitoring_alert_policy" "non_2xx" {
  project               = var.project_id
  display_name          = "${var.name}: DSS notifications answered with non-2xx"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "non-2xx answers, sustained"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "resource.labels.service_name = \"${google_cloud_run_v2_service.this.name}\"",
        "metric.type = \"run.googleapis.com/request_count\"",
        "metric.labels.response_code_class != \"2xx\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = var.non_2xx_threshold
      duration        = "${var.non_2xx_duration_seconds}s"

      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      # No requests at all is no failure: the incident closes once non-2xx answers stop.
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: the DSS is getting non-2xx answers"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) has kept answering
      requests with a status other than 2xx, at more than ${var.non_2xx_threshold} per second in
      each minute, for ${var.non_2xx_duration_seconds / 60} minutes.

      **What it means for the DSS.** The DSS retries a notification that did not get a 2xx, for
      days, so nothing is lost yet: notifications arrive late, and are lost only if the failure
      outlasts the DSS's retries.

      - **401**: the signature does not verify. Most often the subscription's key does not match
        the relay's RELAY_HMAC_KEYS secret (e.g. hmac_secret_version was raised and the
        subscription was not registered again with the new secret), or the DSS's clock is off
        (stale_date, future_date). The error code tells which.
      - **502** (sink_failed): a sink refuses the message, and an operator must act: the relay's
        service account may not publish to the topic, the topic is gone, or the Pub/Sub API is
        disabled in the relay's project.
      - **503** (sink_unavailable, overloaded): a sink is unavailable or slower than
        sink_timeout_ms, or the relay is at its concurrency limits; the DSS's retries may get
        through.
      - Other 4xx: malformed or oversized requests; a burst of 404s and 401s from scanners of
        the public URL is noise.

      **Where to look.** In Metrics Explorer, logging.googleapis.com/user/${var.name}/answers
      by code, and ${var.name}/publish_latency by sink and result. In Logs Explorer, the failed
      answers with their codes, and the relay's warnings and errors (a sink's error among them):
      `resource.type="cloud_run_revision" resource.labels.service_name="${var.name}" (jsonPayload.Class="4xx" OR jsonPayload.Class="5xx" OR jsonPayload.level="WARN" OR jsonPayload.level="ERROR")`.
      Cloud Run's own 429, 500 and 503 answers (no instance available, a crashing revision)
      have no relay line; look at the revisions' state and the request logs there.
    EOT
  }
}

################################################################################
# Alert: dead-lettered messages wait in a dead-letter subscription
################################################################################

# Only for subscriptions named in dead_letter_subscriptions (subscriptions of dead-letter topics
# in project_id, which the subscribers' own subscriptions forward to after their last delivery
# attempt). A message there is a notification the relay published and a consumer could not
# process.
resource "google_monitoring_alert_policy" "dead_letters" {
  count = length(var.dead_letter_subscriptions) > 0 ? 1 : 0

  project               = var.project_id
  display_name          = "${var.name}: dead-lettered DSS notifications"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "WARNING"
  user_labels           = var.labels

  conditions {
    display_name = "messages waiting in a dead-letter subscription"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"pubsub_subscription\"",
        "resource.labels.project_id = \"${var.project_id}\"",
        "resource.labels.subscription_id = one_of(${join(", ", [for s in var.dead_letter_subscriptions : "\"${s}\""])})",
        "metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "300s"

      # One series per subscription: the incident names the one that holds messages.
      aggregations {
        alignment_period   = "60s"
        per_series_aligner = "ALIGN_MAX"
      }

      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: DSS notifications in a dead-letter subscription"
    content   = <<-EOT
      A dead-letter subscription of the **${var.name}** relay's notifications (project
      ${var.project_id}) has held messages for 5 minutes. Each is a notification the relay
      published and the DSS considers delivered, which a consumer received and did not
      acknowledge within its subscription's max_delivery_attempts: the DSS will not send it
      again.

      **What to do.** Read the messages with
      `gcloud pubsub subscriptions pull SUBSCRIPTION --project=${var.project_id} --limit=10`
      (without --auto-ack they stay), find why the consumer failed on them and fix it, then
      process them from here (publishing them to the relay's topic again would deliver them to
      every subscription of it) and acknowledge them. The incident closes when the subscription
      is empty.
    EOT
  }
}
