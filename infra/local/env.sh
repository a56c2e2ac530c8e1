# Points the relay and its tests at the local emulators of infra/local/emulators.sh. Source it:
#
#   source infra/local/env.sh
#
# These are the standard variables that the AWS SDK (aws-config's default chain: endpoint, region,
# static credentials, no instance-metadata probe) and Google's Pub/Sub emulator convention
# (PUBSUB_EMULATOR_HOST, FIRESTORE_EMULATOR_HOST: plain HTTP, no credentials) define, and that the
# relay reads, so the production code path is unchanged: only the environment differs.
# PUBSUB_PROJECT_ID names the project the tests use (the emulators accept any). MOTO_PORT,
# PUBSUB_PORT and FIRESTORE_PORT follow emulators.sh (defaults 5000, 8085, 8086).
#
# Meant to be sourced into your shell, so it sets no shell options (no `set -euo pipefail`) and
# does not change directory.

export AWS_ENDPOINT_URL=http://127.0.0.1:${MOTO_PORT:-5000}
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1 # the name boto3 and the aws CLI read, for Python test helpers
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_EC2_METADATA_DISABLED=true
export PUBSUB_EMULATOR_HOST=127.0.0.1:${PUBSUB_PORT:-8085}
export FIRESTORE_EMULATOR_HOST=127.0.0.1:${FIRESTORE_PORT:-8086}
export STORAGE_EMULATOR_HOST=127.0.0.1:${GCS_PORT:-4443}
export PUBSUB_PROJECT_ID=test-project
