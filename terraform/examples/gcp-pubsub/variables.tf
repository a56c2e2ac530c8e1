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
  description = "The relay-gcf image pushed by `make image`, e.g. us-east1-docker.pkg.dev/PROJECT/relay/relay-gcf:TAG."
  type        = string
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

