variable "project_id" {
  description = "Project that runs the relay and owns the topic."
  type        = string
}

variable "region" {
  description = "Region of the Cloud Run service."
  type        = string
  default     = "us-east1"
}

variable "image" {
  description = "A relay-gcf image already pushed (e.g. by `make image` and `docker push`), such as us-east1-docker.pkg.dev/PROJECT/relay/relay-gcf:TAG. null (the default) builds it with Cloud Build from this checkout (the gcp-relay-image module), which needs the gcloud CLI signed in with `gcloud auth login` and no Docker engine."
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

variable "alert_notification_channels" {
  description = "Cloud Monitoring notification channels (projects/PROJECT/notificationChannels/ID) for the relay's alerts: its answers by code, Cloud Run's own errors, undelivered and refused notifications, dropped metric lines, and messages in the dead-letter subscription. Empty: incidents show in Cloud Monitoring only."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.alert_notification_channels : can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/notificationChannels/[0-9]+$", c))])
    error_message = "Each alert_notification_channels entry must be projects/PROJECT/notificationChannels/ID."
  }
}

variable "route_writers" {
  description = "IAM members (user:…, group:…, serviceAccount:…) that may change the stored routes document, and replay from the archive (archive_readers). Split topics need more, in the project (the gcp-relay README, \"Live routes and splits\"). [] leaves both to the project's administrators."
  type        = list(string)
  default     = []
}
