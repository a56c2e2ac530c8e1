################################################################################
# Logs-based metrics of the delivery ledger, from the relay's metric lines
################################################################################

# With the ledger (ledger.tf) the relay also prints, per ledger call and per duplicate:
#
#   ledger call: {"Relay":…,"Call":"claim","Result":"ok","LedgerCalls":1,"LedgerLatency":4.2,…}
#   duplicate:   {"Relay":…,"Duplicates":1,…}
#
# Call is claim or settle; Result ok, busy (another attempt holds the destinations) or error.
# Same lines, filter and buckets as the metrics of monitoring.tf.
resource "google_logging_metric" "duplicates" {
  count = var.ledger_enabled ? 1 : 0

  project     = var.project_id
  name        = "${var.name}/duplicates"
  description = "Notifications every routed destination of the ${var.name} relay had already acknowledged, answered 202 duplicate without publishing (with the delivery ledger)."
  filter      = "${local.metric_lines} AND jsonPayload.Duplicates:*"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name}: duplicates"
  }
}

resource "google_logging_metric" "ledger_latency" {
  count = var.ledger_enabled ? 1 : 0

  project         = var.project_id
  name            = "${var.name}/ledger_latency"
  description     = "Time a call of the ${var.name} relay to its delivery ledger took, in milliseconds, by call (claim, settle) and result (ok, busy, error)."
  filter          = "${local.metric_lines} AND jsonPayload.LedgerCalls:*"
  value_extractor = "EXTRACT(jsonPayload.LedgerLatency)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "ms"
    display_name = "${var.name}: ledger latency"

    labels {
      key         = "call"
      value_type  = "STRING"
      description = "The ledger call: claim (before publishing) or settle (after)."
    }
    labels {
      key         = "result"
      value_type  = "STRING"
      description = "ok; busy (another attempt holds the destinations); error (the ledger is unavailable: 503 ledger_unavailable)."
    }
  }

  label_extractors = {
    call   = "EXTRACT(jsonPayload.Call)"
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

################################################################################
# Dashboard
################################################################################

# One Cloud Monitoring dashboard, "<name> relay", over the logs-based metrics (monitoring.tf and
# above), Cloud Run's metrics of the service, and the dead-letter subscriptions' backlog. Widgets
# are laid out two to a row, in order.
#
# Each entry of dashboard_widgets is { shown, widget }: the ledger's widgets (duplicates, ledger
# latency, undelivered) are shown with ledger_enabled, the dead letters with
# dead_letter_subscriptions. tests/terraform/dashboard.rs holds every widget to a metric the
# relay or Google Cloud emits, with the labels it has.
locals {
  dashboard_alignment = "60s"

  dashboard_widgets = [
    {
      shown = true
      widget = {
        title = "Answers by class (per minute)"
        xyChart = {
          dataSets = [{
            plotType = "STACKED_BAR"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.answers.name}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_SUM"
                  crossSeriesReducer = "REDUCE_SUM"
                  groupByFields      = ["metric.label.\"class\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Answers by status and code (per minute)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.answers.name}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_SUM"
                  crossSeriesReducer = "REDUCE_SUM"
                  groupByFields      = ["metric.label.\"status\"", "metric.label.\"code\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Answer latency by class, p99 (ms)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.answer_latency.name}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_DELTA"
                  crossSeriesReducer = "REDUCE_PERCENTILE_99"
                  groupByFields      = ["metric.label.\"class\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Publish latency by destination, p99 (ms)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.publish_latency.name}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_DELTA"
                  crossSeriesReducer = "REDUCE_PERCENTILE_99"
                  groupByFields      = ["metric.label.\"sink\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Batch size by destination, median (messages per call)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.batch_size.name}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_DELTA"
                  crossSeriesReducer = "REDUCE_PERCENTILE_50"
                  groupByFields      = ["metric.label.\"sink\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = var.ledger_enabled
      widget = {
        title = "Duplicates: notifications answered without publishing (per minute)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${join("", google_logging_metric.duplicates[*].name)}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_SUM"
                  crossSeriesReducer = "REDUCE_SUM"
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = var.ledger_enabled
      widget = {
        title = "Ledger latency by call and result, p99 (ms)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${join("", google_logging_metric.ledger_latency[*].name)}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_DELTA"
                  crossSeriesReducer = "REDUCE_PERCENTILE_99"
                  groupByFields      = ["metric.label.\"call\"", "metric.label.\"result\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = var.ledger_enabled
      widget = {
        title = "Undelivered: notifications a destination has not acknowledged after an hour (per hour)"
        xyChart = {
          dataSets = [{
            plotType = "STACKED_BAR"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${join("", google_logging_metric.undelivered[*].name)}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = "3600s"
                  perSeriesAligner   = "ALIGN_SUM"
                  crossSeriesReducer = "REDUCE_SUM"
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Metric lines dropped: lines reporting drops (per minute)"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.metric_lines_dropped.name}\" resource.type=\"cloud_run_revision\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_SUM"
                  crossSeriesReducer = "REDUCE_SUM"
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = length(var.dead_letter_subscriptions) > 0
      widget = {
        title = "Dead letters: messages waiting in the dead-letter subscriptions"
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" resource.type=\"pubsub_subscription\" resource.label.\"subscription_id\"=one_of(${join(",", [for s in var.dead_letter_subscriptions : "\"${s}\""])})"
                aggregation = {
                  alignmentPeriod  = local.dashboard_alignment
                  perSeriesAligner = "ALIGN_MAX"
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Cloud Run instances by state"
        xyChart = {
          dataSets = [{
            plotType = "STACKED_AREA"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"run.googleapis.com/container/instance_count\" resource.type=\"cloud_run_revision\" resource.label.\"service_name\"=\"${google_cloud_run_v2_service.this.name}\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_MAX"
                  crossSeriesReducer = "REDUCE_SUM"
                  groupByFields      = ["metric.label.\"state\""]
                }
              }
            }
          }]
        }
      }
    },
    {
      shown = true
      widget = {
        title = "Cloud Run requests by response class (per minute)"
        xyChart = {
          dataSets = [{
            plotType = "STACKED_BAR"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = "metric.type=\"run.googleapis.com/request_count\" resource.type=\"cloud_run_revision\" resource.label.\"service_name\"=\"${google_cloud_run_v2_service.this.name}\""
                aggregation = {
                  alignmentPeriod    = local.dashboard_alignment
                  perSeriesAligner   = "ALIGN_SUM"
                  crossSeriesReducer = "REDUCE_SUM"
                  groupByFields      = ["metric.label.\"response_code_class\""]
                }
              }
            }
          }]
        }
      }
    },
  ]
}

# dashboard_json is written as the Monitoring API returns it, so that a plan after an apply
# shows no change: the API writes int64 fields as JSON strings (columns "2", not 2), and the
# provider ignores only the fields the API adds (etag, name, defaults), not ones it rewrites.
# Every other value here is a string, an enum or a list the API returns as given.
resource "google_monitoring_dashboard" "this" {
  count = var.dashboard_enabled ? 1 : 0

  project = var.project_id
  dashboard_json = jsonencode({
    displayName = "${var.name} relay"
    gridLayout = {
      columns = "2"
      widgets = [for w in local.dashboard_widgets : w.widget if w.shown]
    }
  })
}
