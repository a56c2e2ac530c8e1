# A relay on Cloud Run publishing to a Pub/Sub topic it creates (the module's default,
# create_topic = true), plus a pull subscription to read the notifications back, with a
# dead-letter topic and subscription behind it.
#
# Without var.image, Cloud Build builds the relay-gcf image from this checkout
# (gcp-relay-image): the machine running terraform apply needs the gcloud CLI, signed in with
# `gcloud auth login`, and no Docker engine.
provider "google" {
  project = var.project_id
}

provider "google-beta" {
  project = var.project_id
}

locals {
  name = "dss-relay"
}

# Every API that the resources below and in the modules need, in var.project_id: Artifact
# Registry, Cloud Build and Cloud Storage for the image (gcp-relay-image); Resource Manager for
# the project lookup and the builder's log-writer grant; IAM for the service accounts; Logging
# for the logs-based metrics and the build's log; Monitoring for the alert policies; Pub/Sub,
# Cloud Run and Secret Manager for the relay; Cloud Storage again for its routes bucket;
# Firestore for its delivery ledger, and Resource Manager again for the ledger's grant.
resource "google_project_service" "this" {
  for_each = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# Pub/Sub's service agent forwards dead letters: it publishes to the dead-letter topic and
# acknowledges on the source subscription, so it needs a role on each. On a fresh project the
# agent (service-<number>@gcp-sa-pubsub.iam.gserviceaccount.com) may not exist yet when the API
# has just been enabled, and IAM refuses a binding to a member that does not exist: this asks
# Service Usage to create it and waits for it (generateServiceIdentity), before either grant.
# Only the google-beta provider has the resource; nothing else here uses google-beta.
resource "google_project_service_identity" "pubsub" {
  provider = google-beta

  project = var.project_id
  service = "pubsub.googleapis.com"

  depends_on = [google_project_service.this]
}

locals {
  pubsub_service_agent = google_project_service_identity.pubsub.member
}

################################################################################
# The image: built by Cloud Build unless var.image is given
################################################################################

module "image" {
  source = "../../modules/gcp-relay-image"
  count  = var.image == null ? 1 : 0

  project_id = var.project_id
  region     = var.region
  name       = local.name

  depends_on = [google_project_service.this]
}

################################################################################
# The relay
################################################################################

module "relay" {
  source = "../../modules/gcp-relay"

  project_id          = var.project_id
  region              = var.region
  name                = local.name
  image               = var.image != null ? var.image : module.image[0].image
  deletion_protection = var.deletion_protection
  public_invocation   = var.public_invocation

  # Consumers can tell replicas apart by the callback path (payloads carry no replica).
  callback_path = "/?replica=gcp"

  # Incidents for refused and failed answers, at the DSS's retry pace, and for messages in the
  # dead-letter subscription.
  dead_letter_subscriptions   = [google_pubsub_subscription.dead_letter.name]
  alert_notification_channels = var.alert_notification_channels

  # Live routes and splits: a bucket for the stored routes document, which these members change
  # with `relay routes` and `relay split`.
  routes_enabled = true
  route_writers  = var.route_writers

  # The delivery ledger (a Firestore database): a DSS retry publishes only where it was not
  # acknowledged yet, and `relay trace BUNDLE_UUID` shows what happened to a bundle.
  ledger_enabled = true

  # The archive, for `relay replay`: the operators who change the routes also replay.
  archive_enabled = true
  archive_readers = var.route_writers

  depends_on = [google_project_service.this]
}

################################################################################
# Reading the notifications back: a pull subscription, with a dead-letter topic
################################################################################

resource "google_pubsub_subscription" "smoke" {
  project              = var.project_id
  name                 = "${local.name}-smoke"
  topic                = module.relay.topic_id
  ack_deadline_seconds = 60

  # A message its consumer fails to acknowledge 5 times goes to the dead-letter topic, where
  # the relay module's dead-letter alert sees it.
  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = 5
  }

  depends_on = [google_pubsub_topic_iam_member.dead_letter_publisher]
}

resource "google_pubsub_topic" "dead_letter" {
  #checkov:skip=CKV_GCP_83:Holds only notifications already in the relay's topic, which uses the relay module's encryption setting (topic_kms_key_name); this example keeps Google-managed encryption for both.
  project = var.project_id
  name    = "${local.name}-dead-letter"

  depends_on = [google_project_service.this]
}

# Messages published to a topic without a subscription are dropped: this one keeps them, and
# never expires however long it goes unread.
resource "google_pubsub_subscription" "dead_letter" {
  project                    = var.project_id
  name                       = "${local.name}-dead-letter"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "smoke_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.smoke.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}
