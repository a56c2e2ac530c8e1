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
  description = "The relay-gcf image pushed by `make image`, e.g. us-east1-docker.pkg.dev/RELAY_PROJECT/relay/relay-gcf:TAG."
  type        = string
}

variable "deletion_protection" {
  description = "Refuse to destroy the Cloud Run service; set false to be able to `terraform destroy` this example."
  type        = bool
  default     = true
}
