terraform {
  # 1.11: write-only arguments (secret_data_wo); ephemeral resources need 1.10.
  required_version = ">= 1.11.0"

  required_providers {
    # 7.0.0 has secret_data_wo/secret_data_wo_version on google_secret_manager_secret_version and
    # invoker_iam_disabled on google_cloud_run_v2_service.
    google = { source = "hashicorp/google", version = ">= 7.0.0, < 8.0.0" }
    # google_project_service_identity (the Pub/Sub service agent that writes the archive's
    # Cloud Storage subscription, created before it is granted); nothing else uses it.
    google-beta = { source = "hashicorp/google-beta", version = ">= 7.0.0, < 8.0.0" }
    # 3.7.0 added the ephemeral random_password.
    random = { source = "hashicorp/random", version = ">= 3.7.0, < 4.0.0" }
  }
}
