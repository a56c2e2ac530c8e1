variable "project_id" {
  description = "The subscriber's project, which owns the topic."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID: 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "topic" {
  description = "The subscriber's topic: its name, or its ID projects/PROJECT/topics/TOPIC in project_id."
  type        = string

  validation {
    condition     = can(regex("^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/)?[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.topic))
    error_message = "topic must be a topic name or projects/PROJECT/topics/TOPIC."
  }
}

variable "relay_service_account_email" {
  description = "Email of the relay's service account (the gcp-relay module's service_account_email output)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\\.iam\\.gserviceaccount\\.com$", var.relay_service_account_email))
    error_message = "relay_service_account_email must be a service account email such as relay-dss@relay-project.iam.gserviceaccount.com."
  }
}
