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
# Alerts on the relay's answers, at the DSS's pace
################################################################################

# The DSS retries a notification that got no 2xx, on its own schedule (v1: about 0, 1 min,
# 11 min, 1 h 11 min, 7 h 11 min, then daily to 7 days; v2: about 0, 15 min, 6 h 15 min, then
# every 6 h to about 3 days), each attempt with up to about 2 minutes of jitter. A relay that
# fails every notification at ordinary traffic therefore answers non-2xx a few times an hour,
# never minute after minute: a condition that must hold for ten minutes never fires.
#
# The window: the longest gap between a notification's first two attempts (v2: 15 min), plus
# the jitter of both (2 × 2 min), is 19 min; rounded up to 30 min it holds two attempts of one
# notification under either schedule. Each condition sums the relay's answers with the codes it
# watches (the logs-based metric <name>/answers, by its code label) over the last 30 minutes
# (the alignment period, a sliding window in alerting) and opens an incident as soon as that
# sum passes its threshold: any answer an operator must act on; more than
# bad_signature_threshold bad signatures (the DSS's retry, not a scanner's one-off request);
# more than unavailable_threshold 503s (an outage a retry ran into). tests/terraform/alarms.rs
# derives the window from the schedules and simulates a relay failing one notification an hour
# against these policies.
#
# A v2 unversioned tombstone never has two attempts in the window: it skips the inline attempt
# and is retried only after the queue's 6 h visibility timeout (about 0, 6 h, 12 h, …). A window
# that held two of its attempts (over 6 h) would keep every incident open for 6 hours after the
# last failure and let scattered scanners' 401s add up to one. So the window stays: the answers
# an operator must act on alert on one answer (its first attempt), and the two-answer policies
# (bad signatures, 503s) open when the same cause fails a second notification, as a signature
# problem or an outage does for every notification of the subscription; a tombstone's lone 503
# is retried 6 h later and, still failing, counted as undelivered. alarms.rs holds this too.
locals {
  alert_window = "1800s"

  answers_metric = join(" AND ", [
    "resource.type = \"cloud_run_revision\"",
    "metric.type = \"logging.googleapis.com/user/${google_logging_metric.answers.name}\"",
  ])
}

resource "google_monitoring_alert_policy" "needs_operator" {
  project               = var.project_id
  display_name          = "${var.name}: DSS notifications refused in a way retries cannot fix"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "sink_failed, transform_failed or message_too_large answers"

    condition_threshold {
      filter          = "${local.answers_metric} AND metric.labels.code = one_of(\"sink_failed\", \"transform_failed\", \"message_too_large\")"
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = local.alert_window
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.code"]
      }

      trigger {
        count = 1
      }

      # No answers at all is no failure: the incident closes once the window holds none.
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: the relay refused a DSS notification; an operator must act"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) gave at least one answer
      in the last 30 minutes that the DSS's retries will get again until someone acts. The DSS
      keeps retrying (v2 for 3 days, v1 for 7), then drops the notification.

      **Check first** which code (the incident's `code` label; Metrics Explorer,
      logging.googleapis.com/user/${var.name}/answers by code):

      - **502 sink_failed**: the topic refuses the message: the relay's service account may not
        publish to it, the topic is gone, or the Pub/Sub API is disabled. The relay's error line
        names the sink.
      - **413 message_too_large**: a notification too big for the sink (a large attachment).
      - **502 transform_failed**: a destination's transform failed, ran out of time or yielded
        no body; the relay's error line names the destination and why.

      Logs Explorer: `resource.type="cloud_run_revision" resource.labels.service_name="${var.name}" (jsonPayload.Class="4xx" OR jsonPayload.Class="5xx" OR jsonPayload.level="WARN" OR jsonPayload.level="ERROR")`.
    EOT
  }
}

resource "google_monitoring_alert_policy" "bad_signature" {
  project               = var.project_id
  display_name          = "${var.name}: DSS notifications with bad signatures"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "401 answers (signature problems), more than bad_signature_threshold in 30 minutes"

    condition_threshold {
      filter          = "${local.answers_metric} AND metric.labels.status = \"401\""
      comparison      = "COMPARISON_GT"
      threshold_value = var.bad_signature_threshold
      duration        = "0s"

      aggregations {
        alignment_period     = local.alert_window
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: requests with signature problems"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) answered 401 (a
      signature problem) more than ${var.bad_signature_threshold} time(s) in the last 30 minutes.

      **Check first** which code (logging.googleapis.com/user/${var.name}/answers by code) and
      whether they come from the DSS: the relay's warning for each refused request has its
      keyId; the request logs have the User-Agent (python-requests from the DSS).

      - **bad_signature**: the subscription's hmac_secret_key differs from the relay's secret
        (hmac_secret_version raised without registering the subscription again).
      - **unknown_key_id**: it signs with an hmac_key_id the relay's RELAY_HMAC_KEYS secret does
        not hold: register the subscription again, or add the key.
      - **missing_authorization**: the subscription was registered without an HMAC key.
      - **stale_date**, **future_date**: the DSS's clock, or the relay's, is off by more than
        RELAY_MAX_CLOCK_SKEW_SECS.
      - **digest_mismatch**, **invalid_date**, **unsupported_algorithm**,
        **unsupported_digest**, **incomplete_signed_headers**: the request was changed on the
        way, or is not the DSS's.

      The DSS keeps retrying, then drops the notification. If they are scanners of the public
      URL, raise bad_signature_threshold.
    EOT
  }
}

resource "google_monitoring_alert_policy" "unavailable" {
  project               = var.project_id
  display_name          = "${var.name}: DSS notifications answered 503, sustained"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "WARNING"
  user_labels           = var.labels

  conditions {
    display_name = "503 answers, more than unavailable_threshold in 30 minutes"

    condition_threshold {
      filter          = "${local.answers_metric} AND metric.labels.code = one_of(\"sink_unavailable\", \"ledger_unavailable\", \"overloaded\", \"deadline_passed\")"
      comparison      = "COMPARISON_GT"
      threshold_value = var.unavailable_threshold
      duration        = "0s"

      aggregations {
        alignment_period     = local.alert_window
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: the relay keeps answering 503"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) answered 503 more than
      ${var.unavailable_threshold} time(s) in the last 30 minutes. Notifications are late, not
      lost yet: the DSS retries them (v2 next tries 6 hours later).

      **Check first** which code (logging.googleapis.com/user/${var.name}/answers by code):
      **sink_unavailable**, a topic slower than sink_timeout_ms or throttling
      (${var.name}/publish_latency by sink and result); **ledger_unavailable**, the Firestore
      ledger; **overloaded** or **deadline_passed**, the service is short of instances or CPU
      (max_instances, the revisions' CPU and instance counts).
    EOT
  }
}

################################################################################
# Alert: Cloud Run answered without the relay
################################################################################

# What the relay's lines cannot show: requests Cloud Run answered itself. The relay never answers
# 429, 500 or 504, Cloud Run does: 429, no instance available (max_instances reached); 500, a
# crashing revision; 504, the request timeout. This replaces the policy on every non-2xx
# request_count, held for ten minutes: it counted the relay's own answers too (now alerted on by
# code, above) and every scanner's 401 and 404, and the DSS's retries never fail ten minutes in
# a row.
#
# Cloud Run's own 503 (the connection to an instance failed, or its answer was malformed: an
# instance that died mid-request) is not among them: request_count's response_code 503 counts
# the relay's own 503 answers as well (sink_unavailable, ledger_unavailable, overloaded and
# deadline_passed, which the unavailable policy alerts on by code, and in_progress), and a
# threshold condition cannot subtract one count from another. On the dashboard they are the 5xx requests
# (requests by response class) beyond the relay's own 503 answers (answers by status and code),
# and the instance's log has what ended it.
resource "google_monitoring_alert_policy" "platform_errors" {
  project               = var.project_id
  display_name          = "${var.name}: Cloud Run answered DSS notifications without the relay"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "429, 500 or 504 from Cloud Run"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "resource.labels.service_name = \"${google_cloud_run_v2_service.this.name}\"",
        "metric.type = \"run.googleapis.com/request_count\"",
        "metric.labels.response_code = one_of(\"429\", \"500\", \"504\")",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = local.alert_window
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.response_code"]
      }

      trigger {
        count = 1
      }

      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: Cloud Run answered without the relay"
    content   = <<-EOT
      Cloud Run answered requests to **${var.name}** (project ${var.project_id}) itself, at least
      once in the last 30 minutes (the incident's response_code label says which). The DSS
      retries them.

      **Check first**: 429, the service is at max_instances (its instance count; raise
      max_instances if DSS bursts reach it, or it is a flood the cap holds back); 500, the
      revision crashes (its logs at start: the secret, the configuration); 504, requests
      outlive request_timeout_seconds.
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

################################################################################
# Alert: notifications a destination still has not acknowledged after an hour
################################################################################

# With the ledger the relay also prints, for each notification it first received more than an
# hour ago that a destination has still not acknowledged:
#
#   undelivered: {"Relay":…,"Undelivered":1,…}
#
# The DSS may have stopped retrying such a notification, so only an operator gets it there: the
# archive (archive.tf) holds it. Same lines and filter as the metrics above.
resource "google_logging_metric" "undelivered" {
  count = var.ledger_enabled ? 1 : 0

  project     = var.project_id
  name        = "${var.name}/undelivered"
  description = "Notifications the ${var.name} relay first received more than an hour earlier that a destination has still not acknowledged (with the delivery ledger)."
  filter      = "${local.metric_lines} AND jsonPayload.Undelivered:*"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name}: undelivered"
  }
}

resource "google_monitoring_alert_policy" "undelivered" {
  count = var.ledger_enabled ? 1 : 0

  project               = var.project_id
  display_name          = "${var.name}: DSS notifications still undelivered after an hour"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "undelivered notifications, more than undelivered_threshold in an hour"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "metric.type = \"logging.googleapis.com/user/${google_logging_metric.undelivered[0].name}\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = var.undelivered_threshold
      duration        = "0s"

      aggregations {
        alignment_period     = "3600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      # No such line at all is no failure: the incident closes once the hour holds none.
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: DSS notifications still undelivered after an hour"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) counted, in the last
      hour, more than ${var.undelivered_threshold} notification(s) that it first received more
      than an hour ago and that a destination has still not acknowledged
      (logging.googleapis.com/user/${var.name}/undelivered). The DSS may have given up retrying
      them: they will not arrive by themselves.

      **What to do.** Find which destination with `relay trace BUNDLE_UUID` (the ledger_url
      output; the relay's error lines name the sink and the bundle), fix that destination (the
      topic, the service account's grant on it), then send them again from the archive with
      `relay replay --undelivered --since <when the first failed>` (the archive_url output;
      archive_readers may read it).
    EOT
  }
}

################################################################################
# Alert: a request that verified and was then refused
################################################################################

# The relay prints, for each request whose signature verified and that it then refused (400 or
# 415):
#
#   {"Relay":…,"Code":"missing_payload_field","Kept":"true","VerifiedRefused":1,…}
#
# Only a holder of the key sends one, so one line opens an incident. With the archive the request
# is kept, and `relay replay --refused` sends it once the configuration takes it.
resource "google_logging_metric" "verified_refused" {
  project     = var.project_id
  name        = "${var.name}/verified-refused"
  description = "Requests the ${var.name} relay refused (400 or 415) after their signature verified."
  filter      = "${local.metric_lines} AND jsonPayload.VerifiedRefused:*"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name}: verified, then refused"
  }
}

resource "google_monitoring_alert_policy" "verified_refused" {
  project               = var.project_id
  display_name          = "${var.name}: a verified request was refused"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "verified requests refused, any in 30 minutes"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "metric.type = \"logging.googleapis.com/user/${google_logging_metric.verified_refused.name}\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = local.alert_window
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: a verified request was refused"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) refused at least one
      request (400 or 415) whose signature verified
      (logging.googleapis.com/user/${var.name}/verified-refused; each line says its Code). Only
      a holder of the key sends one, so the sender's requests do not match this configuration (a
      subscription's payload form field, RELAY_PAYLOAD_FIELD, a source's dedup or event fields),
      and every retry will be refused the same way.

      **What to do.** With the archive each is kept as refused: list them with `relay trace
      --refused --since <when>` (the archive_url output; archive_readers may read it), fix the
      configuration, then send them with `relay replay --refused --since <when>`. A second run
      sends nothing.
    EOT
  }
}

################################################################################
# Alert: metric lines the relay dropped
################################################################################

# When standard output does not keep up (its queue of 8,192 lines is full), the relay drops
# metric lines and then prints how many:
#
#   {"Relay":…,"MetricLinesDropped":12,…}
#
# Every metric above is read from those lines, so a dropped line is an answer every policy
# missed: one such line in the window opens an incident. The metric counts the lines; the
# number dropped is in each line.
resource "google_logging_metric" "metric_lines_dropped" {
  project     = var.project_id
  name        = "${var.name}/metric-lines-dropped"
  description = "Lines of the ${var.name} relay reporting metric lines it dropped because standard output did not keep up (each line's MetricLinesDropped says how many)."
  filter      = "${local.metric_lines} AND jsonPayload.MetricLinesDropped:*"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name}: metric lines dropped"
  }
}

resource "google_monitoring_alert_policy" "metric_lines_dropped" {
  project               = var.project_id
  display_name          = "${var.name}: metric lines dropped"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "WARNING"
  user_labels           = var.labels

  conditions {
    display_name = "metric lines dropped, any in 30 minutes"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "metric.type = \"logging.googleapis.com/user/${google_logging_metric.metric_lines_dropped.name}\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = local.alert_window
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }

  documentation {
    mime_type = "text/markdown"
    subject   = "${var.name}: the relay dropped metric lines"
    content   = <<-EOT
      The Cloud Run service **${var.name}** (project ${var.project_id}) dropped metric lines in
      the last 30 minutes (logging.googleapis.com/user/${var.name}/metric-lines-dropped; each
      line's MetricLinesDropped says how many): its standard output did not keep up, and the
      answers and publishes those lines counted are missing from every logs-based metric of the
      relay, so the other policies may have missed failures.

      **Check first** the relay's warning "Metric lines dropped" and the requests of that time in
      its logs, and the service's CPU (cpu, concurrency): an instance short of CPU writes its
      lines too slowly.
    EOT
  }
}

################################################################################
# Alert: the archive's records wait in its Cloud Storage subscription
################################################################################

# With archive_pubsub, Pub/Sub took each record when the relay answered, and the subscription
# writes it to the bucket within archive_pubsub_max_duration_secs. A record older than 30
# minutes in the subscription is one the bucket does not have yet: a missing grant, a deleted
# bucket, a retention rule refusing writes.
resource "google_monitoring_alert_policy" "archive_delivery" {
  count = local.archive_pubsub ? 1 : 0

  project               = var.project_id
  display_name          = "${var.name}: archive records not written to the bucket"
  combiner              = "OR"
  enabled               = var.alerts_enabled
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"
  user_labels           = var.labels

  conditions {
    display_name = "oldest unwritten archive record older than 30 minutes"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"pubsub_subscription\"",
        "resource.labels.project_id = \"${var.project_id}\"",
        "resource.labels.subscription_id = \"${var.name}-archive-to-storage\"",
        "metric.type = \"pubsub.googleapis.com/subscription/oldest_unacked_message_age\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = 1800
      duration        = "300s"

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
    subject   = "${var.name}: archive records not written to the bucket"
    content   = <<-EOT
      The Cloud Storage subscription **${var.name}-archive-to-storage** (project
      ${var.project_id}) has held an archive record for more than 30 minutes: the relay
      answered the DSS, Pub/Sub holds the record, and the archive bucket does not have it yet,
      so `relay replay` cannot send it.

      **What to do.** `gcloud pubsub subscriptions describe ${var.name}-archive-to-storage
      --project=${var.project_id}` shows its cloudStorageConfig state: PERMISSION_DENIED (the
      Pub/Sub service agent lost roles/storage.objectCreator or roles/storage.legacyBucketReader
      on the bucket: apply the module again) or NOT_FOUND (the bucket is gone). Once it is fixed
      the subscription writes what it holds, for up to 7 days; the incident closes when the
      oldest record is younger than 30 minutes.
    EOT
  }
}
