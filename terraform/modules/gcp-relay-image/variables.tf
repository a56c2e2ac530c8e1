################################################################################
# Project and naming
################################################################################

variable "project_id" {
  description = "Project that builds and stores the image: the Artifact Registry repository, the staging bucket, the builder service account and the Cloud Build builds. Normally the relay's project, so that Cloud Run's service agent may pull the image without a grant."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID: 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region of the repository, the staging bucket and the builds, e.g. us-east1: the relay's region, so that Cloud Run pulls from its own region. Cloud Build must run builds on its default pool there."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a region such as us-east1 or europe-west4."
  }
}

variable "name" {
  description = "Prefix of what the module creates: the builder service account (build-<name>), the staging bucket (<project_id>-<name>-build) and, unless repository_id is set, the repository. Usually the relay's name (the gcp-relay module's name)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,22}[a-z0-9])?$", var.name))
    error_message = "name must be 1-24 lowercase letters, digits or hyphens, start with a letter and not end with a hyphen."
  }
}

variable "repository_id" {
  description = "ID of the Artifact Registry Docker repository created for the image. null uses name."
  type        = string
  default     = null

  validation {
    condition     = var.repository_id == null || can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.repository_id))
    error_message = "repository_id must be null or 1-63 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen."
  }
}

variable "labels" {
  description = "Labels added to the repository and the staging bucket."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "Label keys must be 1-63 lowercase letters, digits, _ or - starting with a letter; values at most 63 of the same."
  }
}

################################################################################
# Sources and the build
################################################################################

variable "source_dir" {
  description = "Root of the checkout that Cloud Build builds (uploaded by `gcloud builds submit`, less .gcloudignore). null uses this module's own checkout (path.module/../../..). The build runs on the machine that runs terraform apply and needs the gcloud CLI there, signed in with `gcloud auth login`."
  type        = string
  default     = null

  validation {
    condition     = var.source_dir == null || try(length(trimspace(var.source_dir)) > 0, false)
    error_message = "source_dir must be null or a path to the repository's root."
  }
}

variable "staging_retention_days" {
  description = "Days after which the uploaded source tarballs are deleted from the staging bucket. A build reads its tarball when it starts, so a day is enough; keep a few to look into a failed build."
  type        = number
  default     = 3

  validation {
    condition     = var.staging_retention_days >= 1 && var.staging_retention_days <= 365 && floor(var.staging_retention_days) == var.staging_retention_days
    error_message = "staging_retention_days must be a whole number of days between 1 and 365."
  }
}

variable "keep_recent_images" {
  description = "Image versions the repository keeps whatever their age (the newest ones); older versions are deleted 30 days after they were pushed. Every change to the sources pushes one version."
  type        = number
  default     = 10

  validation {
    condition     = var.keep_recent_images >= 1 && var.keep_recent_images <= 1000 && floor(var.keep_recent_images) == var.keep_recent_images
    error_message = "keep_recent_images must be a whole number between 1 and 1000."
  }
}
