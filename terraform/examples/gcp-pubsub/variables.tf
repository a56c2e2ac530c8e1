variable "project_id" {
  description = "Project that runs the relay and owns the topic."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID: 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region of the Cloud Run service."
  type        = string
  default     = "us-east1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Cloud Run region such as us-east1."
  }
}

variable "name" {
  description = "Name of the Cloud Run service (and prefix of the secret, topic and subscription)."
  type        = string
  default     = "dss-relay"

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,22}[a-z0-9])?$", var.name))
    error_message = "name must be 1-24 lowercase letters, digits or hyphens, start with a letter and not end with a hyphen."
  }
}

variable "image" {
  description = "The relay-gcf image pushed by `make image`, e.g. us-east1-docker.pkg.dev/PROJECT/relay/relay-gcf:TAG."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9.-]+(:[0-9]+)?/[A-Za-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$", var.image))
    error_message = "image must be a full image reference with a registry and a tag or digest."
  }
}

variable "deletion_protection" {
  description = "Refuse to destroy the Cloud Run service; set false to be able to `terraform destroy` this example."
  type        = bool
  default     = true
}
