################################################################################
# Dashboard
################################################################################

# One CloudWatch dashboard, <name>, over the relay's own metrics (namespace DssRelay, dimension
# Relay = the function name, from the Embedded Metric Format lines; crates/relay-core/src/
# metrics.rs), the dead-letter queue and the function's Lambda metrics. Per-destination and
# per-code graphs are SEARCH expressions, so a destination or an error code shows up once the
# relay has written a line for it. Widgets are placed by CloudWatch, in order.
#
# Each entry of dashboard_widgets is { shown, widget }: the ledger's widgets (duplicates, ledger
# latency, undelivered) are shown with ledger_enabled, the replays with archive_enabled, the dead
# letters with create_queue. tests/terraform/dashboard.rs holds every
# widget to a metric the relay or AWS emits, with the dimensions it has.
locals {
  dashboard_period = 60

  dashboard_widgets = [
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Answers by class (per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = true
          metrics = [
            ["DssRelay", "Answers", "Relay", var.name, "Class", "2xx"],
            ["DssRelay", "Answers", "Relay", var.name, "Class", "4xx"],
            ["DssRelay", "Answers", "Relay", var.name, "Class", "5xx"],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Answers by status and code (per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "codes", expression = "SEARCH('{DssRelay,Relay,Status,Code} MetricName=\"Answers\" Relay=\"${var.name}\"', 'Sum', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Answer latency by class, p99 (ms)"
          view    = "timeSeries"
          region  = local.region
          stat    = "p99"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "latency", expression = "SEARCH('{DssRelay,Relay,Class} MetricName=\"Latency\" Relay=\"${var.name}\"', 'p99', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Publishes by destination and result (per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "publishes", expression = "SEARCH('{DssRelay,Relay,Sink,Result} MetricName=\"Publishes\" Relay=\"${var.name}\"', 'Sum', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Publish latency by destination, p99 (ms)"
          view    = "timeSeries"
          region  = local.region
          stat    = "p99"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "publish_latency", expression = "SEARCH('{DssRelay,Relay,Sink} MetricName=\"PublishLatency\" Relay=\"${var.name}\"', 'p99', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Batch size by destination (messages per call, average)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Average"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "batch_size", expression = "SEARCH('{DssRelay,Relay,Sink} MetricName=\"BatchSize\" Relay=\"${var.name}\"', 'Average', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = var.ledger_enabled
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Duplicates: notifications answered without publishing (per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            ["DssRelay", "Duplicates", "Relay", var.name],
          ]
        }
      }
    },
    {
      shown = var.ledger_enabled
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Ledger latency by call, p99 (ms); calls by result"
          view    = "timeSeries"
          region  = local.region
          stat    = "p99"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "ledger_latency", expression = "SEARCH('{DssRelay,Relay,Call} MetricName=\"LedgerLatency\" Relay=\"${var.name}\"', 'p99', ${local.dashboard_period})" }],
            [{ id = "ledger_calls", yAxis = "right", expression = "SEARCH('{DssRelay,Relay,Call,Result} MetricName=\"LedgerCalls\" Relay=\"${var.name}\"', 'Sum', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = var.ledger_enabled
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Undelivered: notifications a destination has not acknowledged after an hour (per hour)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = 3600
          stacked = false
          metrics = [
            ["DssRelay", "Undelivered", "Relay", var.name],
          ]
        }
      }
    },
    {
      shown = var.archive_enabled
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Replays by destination and result (relay replay, where its output reaches CloudWatch)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            [{ id = "replays", expression = "SEARCH('{DssRelay,Relay,Sink,Result} MetricName=\"Replays\" Relay=\"${var.name}\"', 'Sum', ${local.dashboard_period})" }],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Metric lines dropped (standard output did not keep up; per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            ["DssRelay", "MetricLinesDropped", "Relay", var.name],
          ]
        }
      }
    },
    {
      shown = var.create_queue
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Dead letters: messages waiting in the dead-letter queue"
          view    = "timeSeries"
          region  = local.region
          stat    = "Maximum"
          period  = 300
          stacked = false
          metrics = [
            ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", one(aws_sqs_queue.dlq[*].name)],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Lambda concurrency (maximum) and throttles (per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            ["AWS/Lambda", "ConcurrentExecutions", "FunctionName", aws_lambda_function.this.function_name, { stat = "Maximum" }],
            ["AWS/Lambda", "Throttles", "FunctionName", aws_lambda_function.this.function_name, { yAxis = "right" }],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Lambda invocations and errors (per minute)"
          view    = "timeSeries"
          region  = local.region
          stat    = "Sum"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            ["AWS/Lambda", "Invocations", "FunctionName", aws_lambda_function.this.function_name],
            ["AWS/Lambda", "Errors", "FunctionName", aws_lambda_function.this.function_name],
          ]
        }
      }
    },
    {
      shown = true
      widget = {
        type   = "metric"
        width  = 12
        height = 6
        properties = {
          title   = "Lambda duration, p50 and p99 (ms)"
          view    = "timeSeries"
          region  = local.region
          stat    = "p99"
          period  = local.dashboard_period
          stacked = false
          metrics = [
            ["AWS/Lambda", "Duration", "FunctionName", aws_lambda_function.this.function_name, { stat = "p50" }],
            ["AWS/Lambda", "Duration", "FunctionName", aws_lambda_function.this.function_name, { stat = "p99" }],
          ]
        }
      }
    },
  ]
}

resource "aws_cloudwatch_dashboard" "this" {
  count = var.dashboard_enabled ? 1 : 0

  dashboard_name = var.name
  dashboard_body = jsonencode({
    widgets = [for w in local.dashboard_widgets : w.widget if w.shown]
  })
}
