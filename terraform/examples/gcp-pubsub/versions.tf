terraform {
  required_version = ">= 1.11.0"

  required_providers {
    google = { source = "hashicorp/google", version = ">= 7.0.0, < 8.0.0" }
    # google_project_service_identity (the Pub/Sub service agent, created before it is granted).
    google-beta = { source = "hashicorp/google-beta", version = ">= 7.0.0, < 8.0.0" }
  }
}
