# The module plans with every toggle off and every toggle on, against a mocked AWS provider:
# what a reference to a resource that a toggle leaves out (a null in a template, an empty index)
# would break at plan time. `infra/local/tf-check.sh` runs it (`terraform test`).

mock_provider "aws" {
  mock_data "aws_region" {
    defaults = { name = "us-east-1", region = "us-east-1" }
  }
  mock_data "aws_caller_identity" {
    defaults = { account_id = "111111111111" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
}

variables {
  name            = "toggles"
  lambda_zip_path = "tests/bootstrap.zip" # a placeholder tf-check.sh writes: the plan hashes it
  architecture    = "arm64"
}

run "every_toggle_off" {
  command = plan

  variables {
    create_queue                  = false
    sns_topic_arn                 = "arn:aws:sns:us-east-1:111111111111:dss"
    alarms_enabled                = false
    dashboard_enabled             = false
    routes_enabled                = false
    ledger_enabled                = false
    ledger_point_in_time_recovery = false
    archive_enabled               = false
  }
}

run "every_toggle_on" {
  command = plan

  variables {
    create_queue                  = true
    fifo_queue                    = true
    alarms_enabled                = true
    alarm_actions                 = ["arn:aws:sns:us-east-1:111111111111:ops"]
    dashboard_enabled             = true
    routes_enabled                = true
    ledger_enabled                = true
    ledger_point_in_time_recovery = true
    archive_enabled               = true
    archive_readers               = ["arn:aws:iam::111111111111:role/reader"]
    route_writers                 = ["arn:aws:iam::111111111111:role/writer"]
    extra_environment             = { RELAY_MAX_BODY_BYTES = "1048576", RELAY_WARM_CONNECTIONS = "false" }
  }

  assert {
    condition     = aws_lambda_function.this.environment[0].variables["RELAY_MAX_BODY_BYTES"] == "1048576"
    error_message = "extra_environment reaches the function"
  }
}

run "extra_environment_may_not_name_the_modules_own_settings" {
  command = plan

  variables {
    create_queue      = true
    extra_environment = { RELAY_SINK_TIMEOUT_MS = "1000" }
  }

  expect_failures = [aws_lambda_function.this]
}

run "extra_environment_takes_no_secret" {
  command = plan

  variables {
    create_queue      = true
    extra_environment = { RELAY_HMAC_SECRET = "not here" }
  }

  expect_failures = [var.extra_environment]
}
