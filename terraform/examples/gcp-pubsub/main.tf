# A relay on Cloud Run publishing to a Pub/Sub topic it creates (the module's default,
# create_topic = true), plus a pull subscription to read the notifications back.
provider "google" {
  project = var.project_id
}

resource "google_project_service" "this" {
  for_each = toset([
    "iam.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
  ])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

module "relay" {
  source = "../../modules/gcp-relay"

  project_id          = var.project_id
  region              = var.region
  name                = "dss-relay"
  image               = var.image
  deletion_protection = var.deletion_protection
  public_invocation   = var.public_invocation

  # Consumers can tell replicas apart by the callback path (payloads carry no replica).
  callback_path = "/?replica=gcp"

  depends_on = [google_project_service.this]
}

resource "google_pubsub_subscription" "smoke" {
  project              = var.project_id
  name                 = "dss-relay-smoke"
  topic                = module.relay.topic_id
  ack_deadline_seconds = 60
}
