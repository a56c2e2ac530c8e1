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
  # An apply checks the function's role as an ARN; every other computed value may stay a
  # mock's random string (the secrets' ARNs, then, each differ).
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::111111111111:role/toggles-relay" }
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
    existing_role_arn             = "arn:aws:iam::111111111111:role/own-relay-role"
    create_queue                  = false
    sns_topic_arn                 = "arn:aws:sns:us-east-1:111111111111:dss"
    alarms_enabled                = false
    dashboard_enabled             = false
    routes_enabled                = false
    ledger_enabled                = false
    ledger_point_in_time_recovery = false
    archive_enabled               = false
  }

  assert {
    condition     = length(aws_iam_role.this) == 0 && length(aws_iam_role_policy.this) == 0 && aws_lambda_function.this.role == "arn:aws:iam::111111111111:role/own-relay-role"
    error_message = "with existing_role_arn the module creates no role and the function runs as the role given"
  }

  assert {
    condition     = output.role_name == "own-relay-role" && output.role_arn == "arn:aws:iam::111111111111:role/own-relay-role"
    error_message = "role_arn and role_name name the role given"
  }

  assert {
    condition     = !contains(keys(aws_lambda_function.this.environment[0].variables), "RELAY_CONFIG")
    error_message = "no RELAY_CONFIG without relay_config"
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
    role_path                     = "/relays/"
    permissions_boundary_arn      = "arn:aws:iam::111111111111:policy/boundaries/relay"
    queue_policy_documents        = ["{\"Version\":\"2012-10-17\",\"Statement\":[{\"Sid\":\"Consumer\",\"Effect\":\"Allow\",\"Principal\":{\"AWS\":\"arn:aws:iam::222222222222:root\"},\"Action\":\"sqs:ReceiveMessage\",\"Resource\":\"*\"}]}"]
    tracing_mode                  = "Active"
  }

  assert {
    condition     = aws_iam_role.this[0].path == "/relays/" && aws_iam_role.this[0].permissions_boundary == "arn:aws:iam::111111111111:policy/boundaries/relay"
    error_message = "role_path and permissions_boundary_arn shape the role the module creates"
  }

  assert {
    condition     = aws_lambda_function.this.environment[0].variables["RELAY_MAX_BODY_BYTES"] == "1048576"
    error_message = "extra_environment reaches the function"
  }

  assert {
    condition     = aws_dynamodb_table.ledger[0].deletion_protection_enabled && !aws_s3_bucket.archive[0].force_destroy
    error_message = "the ledger table is protected from deletion, and the archive bucket is not destroyed with its objects, by default"
  }

  assert {
    condition     = length(aws_sqs_queue_policy.this) == 1 && length(aws_sqs_queue_policy.dlq) == 1
    error_message = "the queue and the dead-letter queue the module creates get their TLS-only policies"
  }

  assert {
    condition     = length(aws_cloudwatch_metric_alarm.metric_lines_dropped) == 1
    error_message = "dropped metric lines alarm"
  }

  assert {
    condition     = aws_lambda_function.this.tracing_config[0].mode == "Active"
    error_message = "tracing_mode = \"Active\" records the function's traces"
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

run "extra_environment_may_not_set_relay_config" {
  command = plan

  variables {
    create_queue      = true
    extra_environment = { RELAY_CONFIG = "arn:aws:secretsmanager:us-east-1:111111111111:secret:elsewhere-AbCdEf" }
  }

  expect_failures = [var.extra_environment]
}

run "relay_config_takes_no_secret" {
  command = plan

  variables {
    create_queue = true
    relay_config = "[relay]\nhmac_secret = \"not here\"\n"
  }

  expect_failures = [var.relay_config]
}

run "source_secrets_need_relay_config" {
  command = plan

  variables {
    create_queue       = true
    source_secret_arns = { github = "arn:aws:secretsmanager:us-east-1:111111111111:secret:relay/github-AbCdEf" }
  }

  expect_failures = [var.source_secret_arns]
}

run "source_secret_arns_are_whole_arns" {
  command = plan

  variables {
    create_queue       = true
    relay_config       = "[sources.github]\nscheme = \"github\"\n"
    source_secret_arns = { github = "arn:aws:secretsmanager:us-east-1:111111111111:secret:relay/*" }
  }

  expect_failures = [var.source_secret_arns]
}

# The configuration file and the sources' secrets, applied against the mocked provider so that
# every ARN is known: the function reads RELAY_CONFIG from the module's secret, the role may read
# exactly that secret and the sources' secrets given (their key only through Secrets Manager in
# their region), and a replayer gets RELAY_CONFIG and the grant to read it.
run "relay_config_and_source_secrets" {
  command = apply

  variables {
    create_queue               = true
    kms_key_arn                = "arn:aws:kms:us-east-1:111111111111:key/11111111-2222-3333-4444-555555555555"
    relay_config               = "[sources.github]\nscheme = \"github\"\npaths = [\"/github\"]\nsecret_arn = \"arn:aws:secretsmanager:us-west-2:222222222222:secret:relay/github-AbCdEf\"\n"
    source_secret_arns         = { github = "arn:aws:secretsmanager:us-west-2:222222222222:secret:relay/github-AbCdEf" }
    source_secret_kms_key_arns = ["arn:aws:kms:us-west-2:222222222222:key/66666666-7777-8888-9999-000000000000"]
    archive_enabled            = true
    archive_readers            = ["arn:aws:iam::111111111111:role/reader"]
  }

  assert {
    condition     = aws_lambda_function.this.environment[0].variables["RELAY_CONFIG"] == aws_secretsmanager_secret.relay_config[0].arn
    error_message = "RELAY_CONFIG is the ARN of the module's configuration secret"
  }

  assert {
    condition     = aws_secretsmanager_secret_version.relay_config[0].secret_string == var.relay_config && aws_secretsmanager_secret.relay_config[0].kms_key_id == var.kms_key_arn
    error_message = "the secret holds relay_config, encrypted with kms_key_arn"
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.this.statement : toset(s.resources) if s.sid == "ReadRelayConfig"] == [toset([aws_secretsmanager_secret.relay_config[0].arn])]
    error_message = "ReadRelayConfig grants on exactly the configuration secret"
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.this.statement : toset(s.actions) if s.sid == "ReadRelayConfig" || s.sid == "ReadSourceSecrets"] == [toset(["secretsmanager:GetSecretValue"]), toset(["secretsmanager:GetSecretValue"])]
    error_message = "the configuration secret and the sources' secrets are read with GetSecretValue, and nothing else"
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.this.statement : toset(s.resources) if s.sid == "ReadSourceSecrets"] == [toset(["arn:aws:secretsmanager:us-west-2:222222222222:secret:relay/github-AbCdEf"])]
    error_message = "ReadSourceSecrets grants on exactly the ARNs of source_secret_arns"
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.this.statement : [for c in s.condition : [c.test, c.variable, toset(c.values)]] if s.sid == "DecryptSourceSecrets"] == [[["StringEquals", "kms:ViaService", toset(["secretsmanager.us-west-2.amazonaws.com"])]]]
    error_message = "the sources' keys decrypt only through Secrets Manager in the secrets' region"
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.this.statement : toset(s.resources) if s.sid == "DecryptSourceSecrets"] == [toset(["arn:aws:kms:us-west-2:222222222222:key/66666666-7777-8888-9999-000000000000"])]
    error_message = "DecryptSourceSecrets is on exactly the keys of source_secret_kms_key_arns"
  }

  assert {
    condition     = alltrue([for s in data.aws_iam_policy_document.this.statement : length(s.condition) == 1 if s.sid == "UseCustomerManagedKeys"]) && contains(local.kms_via_services, "secretsmanager.us-east-1.amazonaws.com") && contains(local.kms_via_services, "sqs.us-east-1.amazonaws.com")
    error_message = "the module's key is used only through the services that use it"
  }

  assert {
    condition     = [for s in data.aws_iam_policy_document.archive_readers[0].statement : toset(s.resources) if s.sid == "ReadRelayConfig"] == [toset([aws_secretsmanager_secret.relay_config[0].arn])]
    error_message = "archive_reader_policy_json lets a replayer read the configuration secret"
  }

  assert {
    condition     = output.replay_environment["RELAY_CONFIG"] == aws_secretsmanager_secret.relay_config[0].arn && output.relay_config_secret_arn == aws_secretsmanager_secret.relay_config[0].arn
    error_message = "replay_environment carries RELAY_CONFIG"
  }

  assert {
    condition     = strcontains(aws_lambda_function.this.description, aws_secretsmanager_secret_version.relay_config[0].version_id)
    error_message = "a new configuration version changes the function's description, so Lambda starts new environments"
  }
}
