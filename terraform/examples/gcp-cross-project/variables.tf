variable "relay_project_id" {
  description = "Project that runs the relay (Cloud Run service, service account, HMAC secret)."
  type        = string
}

variable "subscriber_project_id" {
  description = "The subscriber's project, which owns the topic."
  type        = string
}

variable "region" {
  description = "Region of the relay's Cloud Run service."
  type        = string
  default     = "us-east1"
}

variable "image" {
  description = "A relay-gcf image already pushed (e.g. by `make image` and `docker push`), such as us-east1-docker.pkg.dev/RELAY_PROJECT/relay/relay-gcf:TAG. null (the default) builds it with Cloud Build from this checkout in relay_project_id (the gcp-relay-image module), which needs the gcloud CLI signed in with `gcloud auth login` and no Docker engine."
  type        = string
  default     = null

  validation {
    condition     = var.image == null || can(regex("^[a-z0-9.-]+(:[0-9]+)?/[A-Za-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$", var.image))
    error_message = "image must be null or a full image reference with a registry and a tag or digest, e.g. us-east1-docker.pkg.dev/my-project/relay/relay-gcf:0.1.0."
  }
}

variable "deletion_protection" {
  description = "Refuse to destroy the Cloud Run service; set false to be able to `terraform destroy` this example."
  type        = bool
  default     = true
}

variable "public_invocation" {
  description = "How the service accepts the DSS's unauthenticated calls: \"allusers_binding\" (allUsers as roles/run.invoker) or \"invoker_iam_disabled\" (no IAM check; needed where domain-restricted sharing refuses allUsers). See the gcp-relay README."
  type        = string
  default     = "allusers_binding"

  validation {
    condition     = contains(["allusers_binding", "invoker_iam_disabled"], var.public_invocation)
    error_message = "public_invocation must be \"allusers_binding\" or \"invoker_iam_disabled\"."
  }
}

variable "subscriber_impersonate_service_account" {
  description = "Service account of the subscriber's that the subscriber's provider impersonates (the topic, its subscription, the Pub/Sub API and the grant in subscriber_project_id); null uses the caller's own application-default credentials there too. The caller needs roles/iam.serviceAccountTokenCreator on it."
  type        = string
  default     = null

  validation {
    condition     = var.subscriber_impersonate_service_account == null || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9-]+\\.iam\\.gserviceaccount\\.com$", var.subscriber_impersonate_service_account))
    error_message = "subscriber_impersonate_service_account must be null or a service account email such as terraform@subscriber-project.iam.gserviceaccount.com."
  }
}
