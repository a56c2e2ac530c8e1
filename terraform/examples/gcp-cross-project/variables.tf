variable "relay_project_id" {
  description = "Project that runs the relay (Cloud Run service, service account, HMAC secret)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.relay_project_id))
    error_message = "relay_project_id must be a project ID."
  }
}

variable "subscriber_project_id" {
  description = "The subscriber's project, which owns the topic."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.subscriber_project_id))
    error_message = "subscriber_project_id must be a project ID."
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
  description = "Name of the Cloud Run service (and prefix of its secret)."
  type        = string
  default     = "dss-relay"

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,22}[a-z0-9])?$", var.name))
    error_message = "name must be 1-24 lowercase letters, digits or hyphens, start with a letter and not end with a hyphen."
  }
}

variable "topic_name" {
  description = "Name of the subscriber's topic."
  type        = string
  default     = "dss-events"

  validation {
    condition     = can(regex("^[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.topic_name))
    error_message = "topic_name must be 3-255 characters starting with a letter."
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
