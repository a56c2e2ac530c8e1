terraform {
  required_version = ">= 1.5.0"

  required_providers {
    # 6.29.0 added `invoked_via_function_url` to aws_lambda_permission, which public Function URLs
    # need since October 2025 (lambda:InvokeFunction next to lambda:InvokeFunctionUrl).
    aws    = { source = "hashicorp/aws", version = ">= 6.29.0, < 7.0.0" }
    random = { source = "hashicorp/random", version = ">= 3.6.0, < 4.0.0" }
  }
}
