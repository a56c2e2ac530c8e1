# The relay runs in one project; the subscriber's topic lives in another. The subscriber grants
# the relay's service account roles/pubsub.publisher on that one topic (gcp-topic-grant).
#
# Two identities: the default provider acts in the relay's project with the caller's
# application-default credentials; the subscriber's provider acts in the subscriber's project,
# with the same credentials or, when subscriber_impersonate_service_account is set, as that
# service account of the subscriber's. README.md lists the roles each one needs.
provider "google" {
  project = var.relay_project_id
}

# gcp-relay's one google-beta resource, in the relay's project.
provider "google-beta" {
  project = var.relay_project_id
}

provider "google" {
  alias                       = "subscriber"
  project                     = var.subscriber_project_id
  impersonate_service_account = var.subscriber_impersonate_service_account
}

# Artifact Registry, Cloud Build and Cloud Storage build and keep the image (gcp-relay-image),
# unless var.image is given. pubsub.googleapis.com is enabled here as well: Pub/Sub charges a publish to the project of the
# caller's credentials, here the relay's service account's project, and refuses it (the relay
# answers 502, forever) while the API is disabled there, wherever the topic lives. Logging and
# Monitoring hold the relay module's logs-based metrics and alert policy. Cloud Storage holds the
# routes bucket the module creates with routes_enabled (off here); enabling it costs nothing.
# Firestore holds the delivery ledger, and Resource Manager takes its project-level grant (an
# IAM condition limits it to the ledger's database).
resource "google_project_service" "relay" {
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

  project            = var.relay_project_id
  service            = each.value
  disable_on_destroy = false
}

################################################################################
# Subscriber's project: the topic (stands in for a topic the subscriber already has)
################################################################################

resource "google_project_service" "subscriber_pubsub" {
  provider = google.subscriber

  project            = var.subscriber_project_id
  service            = "pubsub.googleapis.com"
  disable_on_destroy = false
}

resource "google_pubsub_topic" "subscriber" {
  #checkov:skip=CKV_GCP_83:Stands in for the subscriber's own topic, with Google-managed encryption; a CMEK topic works unchanged, since Pub/Sub's own service agent uses the key.
  provider = google.subscriber

  project = var.subscriber_project_id
  name    = "dss-events"

  depends_on = [google_project_service.subscriber_pubsub]
}

resource "google_pubsub_subscription" "subscriber" {
  provider = google.subscriber

  project              = var.subscriber_project_id
  name                 = "dss-events-pull"
  topic                = google_pubsub_topic.subscriber.id
  ack_deadline_seconds = 60
}

################################################################################
# Relay's project: the image, built by Cloud Build unless var.image is given
################################################################################

module "image" {
  source = "../../modules/gcp-relay-image"
  count  = var.image == null ? 1 : 0

  project_id = var.relay_project_id
  region     = var.region
  name       = "dss-relay"

  depends_on = [google_project_service.relay]
}

################################################################################
# Relay's project: the relay, publishing to the subscriber's topic
################################################################################

module "relay" {
  source = "../../modules/gcp-relay"

  project_id          = var.relay_project_id
  region              = var.region
  name                = "dss-relay"
  image               = var.image != null ? var.image : module.image[0].image
  deletion_protection = var.deletion_protection
  public_invocation   = var.public_invocation
  callback_path       = "/?replica=gcp"

  create_topic   = false
  existing_topic = google_pubsub_topic.subscriber.id

  # The delivery ledger, in the relay's project (a Firestore database).
  ledger_enabled = true

  # The archive, for `relay replay`, in the relay's project (a Cloud Storage bucket).
  archive_enabled = true

  depends_on = [google_project_service.relay]
}

################################################################################
# Subscriber's project: roles/pubsub.publisher on that one topic, for the relay
################################################################################

module "topic_grant" {
  source    = "../../modules/gcp-topic-grant"
  providers = { google = google.subscriber }

  project_id                  = var.subscriber_project_id
  topic                       = google_pubsub_topic.subscriber.name
  relay_service_account_email = module.relay.service_account_email
}
