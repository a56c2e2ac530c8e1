terraform {
  # 1.11: write-only arguments (secret_string_wo); ephemeral resources need 1.10.
  required_version = ">= 1.11.0"

  required_providers {
    # 6.29.0 added `invoked_via_function_url` to aws_lambda_permission, which public Function URLs
    # need since October 2025 (lambda:InvokeFunction next to lambda:InvokeFunctionUrl). Every 6.x
    # release has secret_string_wo/secret_string_wo_version on aws_secretsmanager_secret_version.
    aws = { source = "hashicorp/aws", version = ">= 6.29.0, < 7.0.0" }
    # 3.7.0 added the ephemeral random_password.
    random = { source = "hashicorp/random", version = ">= 3.7.0, < 4.0.0" }
  }
}
