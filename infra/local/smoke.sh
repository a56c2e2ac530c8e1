#!/usr/bin/env bash
# The Quick start, end to end: start relay-gcf as `make run` does, send every sample
# notification with `relay send` (JSON and multipart), and check that the file sink holds each
# payload byte for byte, that the sample sent twice is answered as a duplicate, that
# `relay trace` shows it, and that `relay replay --dry-run` finds each one in the archive.
# The server is stopped by its process id, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${CARGO_TARGET_DIR:-./target}/debug

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export RUN_DIR=target/smoke
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
log=$RUN_DIR/server.log
sink=$RUN_DIR/notifications.jsonl

RELAY_LISTEN=127.0.0.1:$port infra/local/run.sh > "$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

healthy() { python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/', timeout=1)" 2>/dev/null; }
for _ in $(seq 100); do
  healthy && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "smoke: relay-gcf exited" >&2; exit 1; }
  sleep 0.1
done
healthy || { cat "$log"; echo "smoke: relay-gcf did not answer" >&2; exit 1; }

# The exact line run.sh printed, run as printed.
send_line=$(grep -m1 'relay send' "$log" | sed 's/^ *//')
echo "smoke: $send_line"
bash -c "$send_line"

secret=$(cat "$RUN_DIR/dev-secret")
sent=(examples/notifications/v2-create.json)
for f in examples/notifications/*.json; do
  answer=$(RELAY_SEND_SECRET=$secret "$bin/relay" send "$f" --url "http://127.0.0.1:$port/dss/notify?replica=gcp" \
    --key-id dev --method put --encoding multipart --form-field foo=bar)
  if [ "$f" = "${sent[0]}" ]; then
    # Sent once already: the ledger answers it as a duplicate and nothing is written twice.
    grep -q '"status":"duplicate"' <<<"$answer" || { echo "smoke: $f again: $answer" >&2; exit 1; }
    echo "smoke: $f sent again: answered duplicate"
  else
    sent+=("$f")
  fi
done

trace_line=$(grep -m1 'relay trace' "$log" | sed 's/^ *//')
echo "smoke: $trace_line"
traced=$(bash -c "$trace_line")
grep -q "2 attempts; 1 duplicate answered without publishing" <<<"$traced" \
  || { echo "$traced"; echo "smoke: relay trace does not show the duplicate" >&2; exit 1; }

replay_line=$(grep -m1 'relay replay' "$log" | sed 's/^ *//')
echo "smoke: $replay_line"
replayed=$(bash -c "$replay_line")
grep -q "^${#sent[@]} archived in the window: ${#sent[@]} would send" <<<"$replayed" \
  || { echo "$replayed"; echo "smoke: relay replay does not find every notification in the archive" >&2; exit 1; }
undelivered=$(bash -c "${replay_line/replay /replay --undelivered }")
grep -q "0 would send, ${#sent[@]} delivered before" <<<"$undelivered" \
  || { echo "$undelivered"; echo "smoke: relay replay --undelivered finds something undelivered" >&2; exit 1; }
echo "smoke: relay replay --dry-run: ${#sent[@]} archived, none undelivered"

python3 - "$sink" "${sent[@]}" <<'PY'
import json, sys
sink, files = sys.argv[1], sys.argv[2:]
lines = [json.loads(l) for l in open(sink, encoding="utf-8")]
assert len(lines) == len(files), f"{len(lines)} lines in the sink, {len(files)} sent"
failed = [f for line, f in zip(lines, files) if line["payload"].encode("utf-8") != open(f, "rb").read()]
for f in failed:
    print(f"smoke: {f}: the payload in the sink differs from the file", file=sys.stderr)
print(f"smoke: {len(files)} notifications sent through relay-gcf to {sink}")
print(f"smoke: {len(files) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
PY
