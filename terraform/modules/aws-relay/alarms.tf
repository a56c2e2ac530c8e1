################################################################################
# Alarms, at the DSS's pace
################################################################################

# The DSS retries a notification that got no 2xx, on its own schedule, without telling anyone:
#
#   v1: attempts at about 0, 1 min, 11 min, 1 h 11 min, 7 h 11 min, 24 h, then daily to 7 days;
#   v2: attempts at about 0, 15 min, 6 h 15 min, then every 6 h to about 3 days;
#
# each with up to about 2 minutes of jitter (v1's notifier runs once a minute, and an attempt may
# take up to its 60 s timeout). So a relay that fails every notification at ordinary traffic
# answers non-2xx a few times an hour, never minute after minute: an alarm that needs a failing
# minute for ten minutes in a row never fires.
#
# The window: the longest gap between a notification's first two attempts (v2: 15 min), plus the
# jitter of both (2 × 2 min), is 19 min; rounded up to 30 min, it holds two attempts of one
# notification under either schedule. Each alarm looks at the last 30 one-minute data points of
# the relay's own answers (Answers by Relay, Status and Code, from its Embedded Metric Format
# lines) and fires when enough of them count: one for an answer an operator must act on, two
# for a bad signature or a 503 (the DSS's retry of a notification, not one stray request or one
# short blip). It fires within a minute or two of the answers that make it, and stays in ALARM
# until 30 minutes after the last one. tests/terraform/alarms.rs derives the window from the
# schedules and simulates a relay failing one notification an hour against these definitions.
#
# One kind of notification never gets two attempts in the window: a v2 unversioned tombstone
# skips the inline attempt and is retried only after the queue's 6 h visibility timeout (about
# 0, 6 h, 12 h, …). A window long enough for two of its attempts (over 6 h) would keep every
# alarm in ALARM for 6 hours after the last failure and let scattered scanners' 401s add up to
# a page. So the window stays: the answers an operator must act on alarm on one answer (its
# first attempt), and the two-answer alarms (bad signatures, 503s) fire when the same cause
# fails a second notification, as a signature problem or an outage does for every notification
# of the subscription; a tombstone's lone 503 is retried 6 h later and, still failing, counted
# in Undelivered. tests/terraform/alarms.rs holds this too.
locals {
  alarm_window_minutes = 30

  # The dimensions every Answers data point of this relay has, besides Status and Code.
  alarm_relay = aws_lambda_function.this.function_name
}

# Answers an operator must act on: the DSS's retries will fail the same way, and no one without
# the key can cause them (a verified request refused has its own alarm, verified_refused).
resource "aws_cloudwatch_metric_alarm" "needs_operator" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-answers-need-operator"
  alarm_description = "The ${var.name} relay refused a DSS notification in a way its retries cannot fix (at least one answer in the last ${local.alarm_window_minutes} minutes). Check first which code, in the DssRelay metric Answers by Relay, Status and Code (Relay = ${var.name}): 502 sink_failed, the queue or topic refuses the message (the role's sqs:SendMessage/sns:Publish, a deleted queue or topic, its KMS key; the log group ${aws_cloudwatch_log_group.this.name} has the sink's error); 413 message_too_large, a notification too big for the sink (a large attachment); 502 transform_failed, a destination's transform failed, ran out of time or yielded no body (the error line names the destination and why; relay explain --transform shows it). The DSS keeps retrying for days (v2: 3 days), then drops the notification."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = 1
  # A quiet relay sends no data points; silence is not a failure.
  treat_missing_data = "notBreaching"

  metric_query {
    id          = "needs_operator"
    expression  = "FILL(sink_failed, 0) + FILL(message_too_large, 0) + FILL(transform_failed, 0)"
    label       = "Answers an operator must act on, per minute"
    return_data = true
  }

  metric_query {
    id = "sink_failed"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "502", Code = "sink_failed" }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "message_too_large"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "413", Code = "message_too_large" }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "transform_failed"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "502", Code = "transform_failed" }
      period      = 60
      stat        = "Sum"
    }
  }

  tags = var.tags
}

# Signature problems, every 401: the DSS signing with another secret or key id, its clock off,
# a subscription registered without a key, or a scanner of the public URL sending garbage. Anyone
# can send these, so one is no page; the DSS retries, so its come back in another minute of the
# window (v1 after 1 min, v2 after 15), and a scanner's one-off request does not.
resource "aws_cloudwatch_metric_alarm" "bad_signature" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-bad-signatures"
  alarm_description = "The ${var.name} relay answered 401 (a signature problem) in at least ${var.alarm_bad_signature_minutes} of the last ${local.alarm_window_minutes} minutes. Check which code (DssRelay Answers by Relay, Status, Code) and whether the requests come from the DSS (keyId and User-Agent python-requests in the log group ${aws_cloudwatch_log_group.this.name}). bad_signature: the subscription's secret differs from the relay's (hmac_secret_version raised without registering again); unknown_key_id: its hmac_key_id is not in the secret; missing_authorization: registered without a key; stale_date, future_date: a clock is off; digest_mismatch and the rest: changed on the way, or not the DSS. The DSS retries, then drops the notification. Scanners: raise alarm_bad_signature_minutes."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "DssRelay"
  metric_name         = "Answers"
  dimensions          = { Relay = local.alarm_relay, Status = "401" }
  statistic           = "Sum"
  period              = 60
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = var.alarm_bad_signature_minutes
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# 503s that outlast a retry: a sink, the ledger or the relay itself unavailable. The DSS's
# retries may get through, so a 503 in one minute is no page; 503s in two minutes of the window
# are an outage that at least one retry ran into.
resource "aws_cloudwatch_metric_alarm" "unavailable" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-sustained-503"
  alarm_description = "The ${var.name} relay answered 503 in at least ${var.alarm_unavailable_minutes} of the last ${local.alarm_window_minutes} minutes: notifications are late (the DSS retries them; v2 next tries 6 hours later), not lost yet. Check first which code, in the DssRelay metric Answers by Relay, Status and Code (Relay = ${var.name}): sink_unavailable, a queue or topic slower than sink_timeout_ms or throttling (PublishLatency by Sink); ledger_unavailable, the ledger table (LedgerCalls with Result = error says since when); overloaded or deadline_passed, the function is short of time or concurrency (Duration, ConcurrentExecutions and Throttles in AWS/Lambda)."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = var.alarm_unavailable_minutes
  treat_missing_data  = "notBreaching"

  metric_query {
    id          = "unavailable"
    expression  = "FILL(sink_unavailable, 0) + FILL(ledger_unavailable, 0) + FILL(overloaded, 0) + FILL(deadline_passed, 0)"
    label       = "503 answers per minute"
    return_data = true
  }

  metric_query {
    id = "sink_unavailable"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "503", Code = "sink_unavailable" }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "ledger_unavailable"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "503", Code = "ledger_unavailable" }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "overloaded"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "503", Code = "overloaded" }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "deadline_passed"
    metric {
      namespace   = "DssRelay"
      metric_name = "Answers"
      dimensions  = { Relay = local.alarm_relay, Status = "503", Code = "deadline_passed" }
      period      = 60
      stat        = "Sum"
    }
  }

  tags = var.tags
}

# What the relay's lines cannot show: invocations that failed without an answer from the relay
# (a crash, a timeout), which the Function URL turns into a 5xx. This replaces the alarm on the
# Function URL's Url4xxCount + Url5xxCount: those count every answer of the relay too (now
# alarmed on by code, above) and every scanner's 401 and 404, and they alarmed only after ten
# failing minutes in a row, which the DSS's retries never make.
resource "aws_cloudwatch_metric_alarm" "function_errors" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-function-errors"
  alarm_description = "Invocations of the ${var.name} function failed without an answer from the relay (a crash or a timeout; the DSS got a 5xx from the Function URL and retries) at least once in the last ${local.alarm_window_minutes} minutes. Check first the log group ${aws_cloudwatch_log_group.this.name} for Task timed out, Runtime exited or a failed start (the secret unreadable at start: its ARN, the role's secretsmanager:GetSecretValue, its KMS key)."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.this.function_name }
  statistic           = "Sum"
  period              = 60
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# Throttles: more notifications at once than reserved_concurrency (or the account's pool). The
# Function URL answers 429 and the DSS retries, so they are late, not lost.
resource "aws_cloudwatch_metric_alarm" "throttles" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-throttles"
  alarm_description = "Invocations of the ${var.name} function were throttled (the DSS got 429 and retries) at least once in the last ${local.alarm_window_minutes} minutes. Check first ConcurrentExecutions of the function against reserved_concurrency (${var.reserved_concurrency == null ? "none: the account's unreserved pool" : var.reserved_concurrency}): a burst of DSS notifications above it, raise reserved_concurrency; a flood of requests the relay refuses (Answers with Status = 401 or 404, Code = missing_authorization, bad_signature, not_found), the cap is doing its job: it keeps the flood from taking the account's other functions' concurrency."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "AWS/Lambda"
  metric_name         = "Throttles"
  dimensions          = { FunctionName = aws_lambda_function.this.function_name }
  statistic           = "Sum"
  period              = 60
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# Messages in the dead-letter queue: consumers failed to process them max_receive_count times.
# They stay there until someone looks, and expire after dlq_message_retention_seconds.
resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  count = var.alarms_enabled && var.create_queue ? 1 : 0

  alarm_name        = "${var.name}-dead-letters"
  alarm_description = "The dead-letter queue ${aws_sqs_queue.dlq[0].name} holds messages: consumers of ${aws_sqs_queue.this[0].name} failed on them ${var.max_receive_count} times. Inspect them, fix the consumer, then redrive them to the queue (aws sqs start-message-move-task --source-arn ${aws_sqs_queue.dlq[0].arn})."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.dlq[0].name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# Undelivered: a notification first received more than an hour ago that a destination has still
# not acknowledged (the relay counts them from its ledger; metric Undelivered by Relay). The DSS
# may have stopped retrying it, so only an operator gets it there: the archive holds it.
resource "aws_cloudwatch_metric_alarm" "undelivered" {
  count = var.alarms_enabled && var.ledger_enabled ? 1 : 0

  alarm_name        = "${var.name}-undelivered"
  alarm_description = "The ${var.name} relay counted at least ${var.alarm_undelivered_threshold} notification(s) in the last hour that it first received more than an hour ago and that a destination has still not acknowledged (DssRelay metric Undelivered, Relay = ${var.name}): the DSS may have given up retrying them, and they will not arrive by themselves. Find which destination with `relay trace BUNDLE_UUID` (ledger_url, ledger_reader_policy_json; the log group ${aws_cloudwatch_log_group.this.name} has the bundles and the sink's error), fix that destination (its queue or topic, the role's grant, its KMS key), then send them again from the archive with `relay replay --undelivered --since <when the first failed>` (archive_url, archive_reader_policy_json)."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "DssRelay"
  metric_name         = "Undelivered"
  dimensions          = { Relay = local.alarm_relay }
  statistic           = "Sum"
  period              = 3600
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = var.alarm_undelivered_threshold
  evaluation_periods  = 1
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# VerifiedRefused: a request whose signature verified and that the relay then refused (400 or
# 415: a subscription registered with another payload field, a body the configuration does not
# read). Only a holder of the key can send one, so one datapoint alarms. With the archive the
# request is kept, and `relay replay --refused` sends it once the configuration takes it.
resource "aws_cloudwatch_metric_alarm" "verified_refused" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-verified-refused"
  alarm_description = "The ${var.name} relay refused at least one request (400 or 415) whose signature verified, in the last ${local.alarm_window_minutes} minutes (DssRelay metric VerifiedRefused, Relay = ${var.name}; each line of the log group ${aws_cloudwatch_log_group.this.name} says its Code): only a holder of the key sends one, so the sender's requests do not match this configuration (a subscription's payload form field, RELAY_PAYLOAD_FIELD, a source's dedup or event fields), and every retry will be refused the same way. With the archive each is kept as refused: list them with `relay trace --refused --since <when>` (archive_url, archive_reader_policy_json), fix the configuration, then send them with `relay replay --refused --since <when>`; a second run sends nothing."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "DssRelay"
  metric_name         = "VerifiedRefused"
  dimensions          = { Relay = local.alarm_relay }
  statistic           = "Sum"
  period              = 60
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# MetricLinesDropped: metric lines the relay dropped because standard output did not keep up
# (its queue of 8,192 lines was full). Every alarm above reads those lines, so a dropped line is
# an answer the alarms never saw: any in the window alarms.
resource "aws_cloudwatch_metric_alarm" "metric_lines_dropped" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-metric-lines-dropped"
  alarm_description = "The ${var.name} relay dropped metric lines in the last ${local.alarm_window_minutes} minutes (DssRelay metric MetricLinesDropped, Relay = ${var.name}): standard output did not keep up, and the answers and publishes those lines counted are missing from every DssRelay metric, so the other alarms may have missed failures. Check the log group ${aws_cloudwatch_log_group.this.name} (the warning \"Metric lines dropped\" says how many) for the requests of that time, and the function's Duration and memory: a function short of CPU (memory_size) writes its lines too slowly."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "DssRelay"
  metric_name         = "MetricLinesDropped"
  dimensions          = { Relay = local.alarm_relay }
  statistic           = "Sum"
  period              = 60
  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = 1
  evaluation_periods  = local.alarm_window_minutes
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  tags = var.tags
}

# The archive's delivery (archive_firehose): Firehose took the records (the relay answered the
# DSS), but has not written them to the bucket. It retries S3 for up to a day and then writes
# them nowhere, so an operator must act within that day. DeliveryToS3.DataFreshness is the age
# of the oldest record it still holds: past 30 minutes (twice the longest buffering interval),
# delivery is failing (the bucket's policy, its KMS key, the delivery role).
resource "aws_cloudwatch_metric_alarm" "archive_delivery" {
  count = var.alarms_enabled && local.archive_firehose ? 1 : 0

  alarm_name        = "${var.name}-archive-delivery"
  alarm_description = "The ${var.name} relay's archive stream ${local.archive_stream} holds records older than 30 minutes (AWS/Firehose DeliveryToS3.DataFreshness): Firehose took them, so the DSS was answered, but it cannot write them to the archive bucket ${coalesce(local.archive_bucket, "-")}, and it gives up on a record a day after it took it. Read why in the log stream archive-delivery of ${aws_cloudwatch_log_group.this.name} (the bucket's policy, archive_kms_key_arn's key policy, the delivery role), fix it, and the held records are delivered; those given up on are lost to relay replay."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  namespace           = "AWS/Firehose"
  metric_name         = "DeliveryToS3.DataFreshness"
  dimensions          = { DeliveryStreamName = local.archive_stream }
  statistic           = "Maximum"
  period              = 300
  comparison_operator = "GreaterThanThreshold"
  threshold           = 1800
  evaluation_periods  = 1
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"

  tags = var.tags
}
