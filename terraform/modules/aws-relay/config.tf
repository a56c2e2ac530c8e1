################################################################################
# Configuration file (RELAY_CONFIG) and the sources' secrets
################################################################################

# relay_config is the relay's configuration file: [relay] settings, [sources.<name>],
# [sinks.<name>], [[routes]] and [[splits]]. It is kept in a secret of its own, and the
# function gets the secret's ARN as RELAY_CONFIG: the relay reads it once at start
# (secretsmanager:GetSecretValue, statement ReadRelayConfig). A source's signing secret is not
# in the file: [sources.<name>] secret_arn names a secret of its own, which the role may read
# when it is listed in source_secret_arns (statement ReadSourceSecrets, iam.tf).

locals {
  relay_config_enabled = var.relay_config != null

  # The regions of the sources' secrets: their KMS keys are used through Secrets Manager there.
  source_secret_regions = distinct([for arn in values(var.source_secret_arns) : split(":", arn)[3]])
}

resource "aws_secretsmanager_secret" "relay_config" {
  #checkov:skip=CKV2_AWS_57:The secret holds the relay's configuration file, not a credential (the module refuses keys in it, and a source's signing secret lives in a secret of its own); a new version is written on every change of relay_config, and there is nothing for a rotation Lambda to rotate.
  count = local.relay_config_enabled ? 1 : 0

  name_prefix             = "${var.name}-config-"
  description             = "RELAY_CONFIG of the ${var.name} relay: its configuration file (TOML), read once at start."
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = var.secret_recovery_window_days
  tags                    = var.tags
}

# Not a credential: secret_string (in the state, as relay_config is), rather than a write-only
# argument, so that a change of relay_config writes a new version by itself.
resource "aws_secretsmanager_secret_version" "relay_config" {
  count = local.relay_config_enabled ? 1 : 0

  secret_id     = aws_secretsmanager_secret.relay_config[0].id
  secret_string = var.relay_config

  # A new text replaces the version: the new one becomes current before the old one goes, so that
  # an environment starting meanwhile always finds a current version.
  lifecycle {
    create_before_destroy = true
  }
}
