################################################################################
# Configuration file (RELAY_CONFIG) and the sources' secrets
################################################################################

# relay_config is the relay's configuration file: [relay] settings, [sources.<name>],
# [sinks.<name>], [[routes]] and [[splits]]. It is kept in a secret of its own; the service
# mounts the version written here as a file (a Secret Manager volume, main.tf) and gets its path
# as RELAY_CONFIG. A new relay_config writes a new version, and the service's template, which
# names that version, rolls out a revision that reads it. A source's signing secret is not in
# the file: source_secret_ids gives the container each one as an environment variable from
# Secret Manager, which [sources.<name>] names with secret_env. The grants are in iam.tf.

locals {
  relay_config_enabled = var.relay_config != null

  # Where the container finds the file: the volume's mount path and the file in it.
  relay_config_dir  = "/etc/relay"
  relay_config_file = "relay.toml"
  relay_config_path = "${local.relay_config_dir}/${local.relay_config_file}"
}

resource "google_secret_manager_secret" "relay_config" {
  count = local.relay_config_enabled ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name}-config"
  labels    = var.labels

  replication {
    auto {}
  }
}

# Not a credential: secret_data (in the state, as relay_config is), rather than a write-only
# argument, so that a change of relay_config writes a new version by itself (secret_data forces
# a new one).
resource "google_secret_manager_secret_version" "relay_config" {
  count = local.relay_config_enabled ? 1 : 0

  secret      = google_secret_manager_secret.relay_config[0].id
  secret_data = var.relay_config

  # The running revision reads the old version until the service points at the new one.
  lifecycle {
    create_before_destroy = true
  }
}
