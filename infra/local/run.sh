#!/usr/bin/env bash
# Starts relay-gcf for local use: file sink under target/run/, the delivery ledger in
# target/run/ledger.db, the archive in target/run/archive/ (its key kept in
# target/run/archive-key), a development HMAC key kept in target/run/dev-secret, and prints the
# `relay send`, `relay trace` and `relay replay` lines to try it.
# RELAY_LISTEN overrides the address (default 127.0.0.1:8080), RUN_DIR the folder (target/run).
set -euo pipefail
cd "$(dirname "$0")/../.."

run_dir=${RUN_DIR:-target/run}
bin=${CARGO_TARGET_DIR:-./target}/debug
listen=${RELAY_LISTEN:-127.0.0.1:8080}
mkdir -p "$run_dir"
if [ ! -s "$run_dir/dev-secret" ]; then
  "$bin/relay" keygen > "$run_dir/dev-secret"
fi
secret=$(cat "$run_dir/dev-secret")
if [ ! -s "$run_dir/archive-key" ]; then
  "$bin/relay" keygen > "$run_dir/archive-key"
fi
archive_key=$(cat "$run_dir/archive-key")

cat <<EOT
relay-gcf on http://$listen/  (file sink: $run_dir/notifications.jsonl, ledger: $run_dir/ledger.db, archive: $run_dir/archive, key id "dev")
Development key: $secret

In another terminal, send a sample notification:
  RELAY_SEND_SECRET=$secret $bin/relay send examples/notifications/v2-create.json --url http://$listen/ --key-id dev

Send it again: the answer is "duplicate", and nothing is written twice. What happened to it:
  $bin/relay trace c86309f6-e5b7-4698-abb6-b81644573bff --ledger $run_dir/ledger.db

What the archive would send again to the file sink, from the last hour (drop --dry-run to send):
  RELAY_HMAC_SECRET=$secret RELAY_FILE_SINK=$run_dir/notifications.jsonl RELAY_LEDGER_URL=$run_dir/ledger.db RELAY_ARCHIVE_URL=$run_dir/archive RELAY_ARCHIVE_KEY=\$(cat $run_dir/archive-key) $bin/relay replay --since 1h --dry-run

EOT

export RELAY_LISTEN=$listen
export RELAY_HMAC_KEYS="{\"dev\": \"$secret\"}"
export RELAY_FILE_SINK=$run_dir/notifications.jsonl
export RELAY_LEDGER_URL=${RELAY_LEDGER_URL:-$run_dir/ledger.db}
export RELAY_ARCHIVE_URL=${RELAY_ARCHIVE_URL:-$run_dir/archive}
export RELAY_ARCHIVE_KEY=${RELAY_ARCHIVE_KEY:-$archive_key}
export RELAY_LOG_FORMAT=${RELAY_LOG_FORMAT:-text}
exec "$bin/relay-gcf"
