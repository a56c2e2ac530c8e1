terraform {
  required_version = ">= 1.11.0"

  required_providers {
    google = { source = "hashicorp/google", version = ">= 7.0.0, < 8.0.0" }
    # gcp-relay's Pub/Sub service agent for its archive subscription (google_project_service_identity).
    google-beta = { source = "hashicorp/google-beta", version = ">= 7.0.0, < 8.0.0" }
  }
}
