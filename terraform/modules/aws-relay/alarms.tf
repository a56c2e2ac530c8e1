################################################################################
# Alarms
################################################################################

# Non-2xx answers, sustained. The DSS retries every non-2xx for days without telling anyone, so
# a relay that refuses (401: key mismatch), cannot publish (502: a sink refuses; 503: a sink is
# unavailable) or fails outright (Lambda errors and timeouts, throttling) must be noticed by its
# operator. The Function URL's own counts include the answers Lambda gives when the relay never
# ran; the relay's metric lines (namespace DssRelay, dimension Relay = the function name) say
# which status and code.
resource "aws_cloudwatch_metric_alarm" "non_2xx" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-non-2xx-answers"
  alarm_description = "The ${var.name} relay answered non-2xx at least ${var.alarm_non_2xx_per_minute} time(s) a minute for ${var.alarm_non_2xx_minutes} minutes. The DSS retries each one for days. Look at the DssRelay metrics (Answers by Status and Code, Relay = ${var.name}) and the log group ${aws_cloudwatch_log_group.this.name}: 401 means the DSS signs with another key; 502, a sink refuses the message (permissions, a missing queue); 503, a sink is unavailable or slow; 5xx without a relay line, Lambda errors or throttling."
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = var.alarm_non_2xx_per_minute
  evaluation_periods  = var.alarm_non_2xx_minutes
  datapoints_to_alarm = var.alarm_non_2xx_minutes
  # A quiet relay sends no data points; silence is not a failure.
  treat_missing_data = "notBreaching"

  metric_query {
    id          = "non_2xx"
    expression  = "FILL(client_errors, 0) + FILL(server_errors, 0)"
    label       = "Non-2xx answers per minute"
    return_data = true
  }

  metric_query {
    id = "client_errors"
    metric {
      namespace   = "AWS/Lambda"
      metric_name = "Url4xxCount"
      dimensions  = { FunctionName = aws_lambda_function.this.function_name }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "server_errors"
    metric {
      namespace   = "AWS/Lambda"
      metric_name = "Url5xxCount"
      dimensions  = { FunctionName = aws_lambda_function.this.function_name }
      period      = 60
      stat        = "Sum"
    }
  }

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
