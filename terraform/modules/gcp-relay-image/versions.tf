terraform {
  # 1.4: terraform_data.
  required_version = ">= 1.4.0"

  required_providers {
    google = { source = "hashicorp/google", version = ">= 7.0.0, < 8.0.0" }
    # time_sleep, to let the builder's grants reach every service before the first build.
    time = { source = "hashicorp/time", version = ">= 0.9.0, < 1.0.0" }
  }
}
