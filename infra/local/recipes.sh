#!/usr/bin/env bash
# Runs the READMEs' commands as a deployed user runs them, against the aws-sqs example that
# infra/local/moto-apply.sh applied to moto: every ```sh block of
#
#   terraform/examples/aws-sqs/README.md   (deploy, register, send, read, split, trace, replay)
#   terraform/modules/aws-relay/README.md  (routes and splits, trace, replay)
#
# in order, each README as one bash script (`set -euo pipefail`: the first command that fails
# fails the run), from a directory laid out as the repository root (terraform/ is the applied
# copy, with its state). Where the machine differs from a user's, and only there:
#
#   - aws is the AWS CLI with moto's endpoint (--endpoint-url);
#   - the Function URL is moto's, which serves nothing: `terraform output -raw endpoint_url`
#     (and callback_url) answer the URL of relay-gcf started here with the function's own
#     environment (as moto's Lambda keeps it: RELAY_CONFIG's secret, the module's keys, its
#     queue, ledger and archive), the same relay-core behind another adapter;
#   - the DSS is out of reach: curl to "$DSS/v1/subscriptions" checks the registration's body
#     (callback_url, hmac_key_id and hmac_secret_key present) and answers it back with a uuid,
#     as the DSS does; every other curl is the real one;
#   - `make lambda` is not run: moto-apply.sh deployed a placeholder package;
#   - `terraform apply` is answered yes (TF_CLI_ARGS_apply=-auto-approve), as a user types it;
#   - the placeholders are filled in: <bundle uuid> and the modules' sample uuid with the bundle
#     of examples/notifications/v2-create.json (the notification the example sends), <account>
#     with moto's account, <developers> with a role name;
#   - between the two READMEs, a split named my-test left by the first is stopped.
#
# relay-gcf is stopped by its process id, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
bin=$(cd "${CARGO_TARGET_DIR:-./target}/debug" && pwd)
moto=http://127.0.0.1:${MOTO_PORT:-5000}
summary=target/moto/aws-sqs.json
readmes=(terraform/examples/aws-sqs/README.md terraform/modules/aws-relay/README.md)

if [ ! -f "$summary" ]; then
  echo "recipes: no $summary: apply the example first (infra/local/moto-apply.sh)" >&2
  exit 1
fi
for tool in relay relay-gcf; do
  [ -x "$bin/$tool" ] || { echo "recipes: no $bin/$tool (cargo build --workspace --all-features)" >&2; exit 1; }
done

work=target/moto/recipes
rm -rf "$work"
mkdir -p "$work/bin" "$work/root/target/debug"
root=$(cd "$work/root" && pwd)
ln -s "$repo/target/moto/terraform" "$root/terraform"
ln -s "$repo/examples" "$root/examples"
ln -s "$bin/relay" "$root/target/debug/relay"
ln -s "$bin/relay" "$work/bin/relay"
real_aws=$(command -v aws)
real_terraform=$(command -v terraform)
real_curl=$(command -v curl)

# The deployed function's environment, and the bundle of the example's notification.
python3 - "$summary" "$work/function.env" <<'PY'
import json, shlex, sys
with open(sys.argv[1], encoding="utf-8") as f:
    deployed = json.load(f)
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for name, value in deployed["environment"].items():
        out.write(f"export {name}={shlex.quote(value)}\n")
PY
bundle=$(python3 -c 'import json; print(json.load(open("examples/notifications/v2-create.json"))["match"]["bundle_uuid"])')

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$work/relay-gcf.log
(
  # shellcheck disable=SC1091
  source "$work/function.env"
  export AWS_ENDPOINT_URL=$moto AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  export AWS_EC2_METADATA_DISABLED=true RELAY_LISTEN=127.0.0.1:$port
  exec "$bin/relay-gcf"
) >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  "$real_curl" -s -o /dev/null "http://127.0.0.1:$port/" && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "recipes: relay-gcf exited" >&2; exit 1; }
  sleep 0.1
done

cat >"$work/bin/aws" <<EOF
#!/usr/bin/env bash
exec "$real_aws" --endpoint-url "$moto" "\$@"
EOF
cat >"$work/bin/terraform" <<EOF
#!/usr/bin/env bash
# The Function URL's outputs name the local relay-gcf; everything else is terraform's.
case "\$*" in
  *"output -raw endpoint_url") echo "http://127.0.0.1:$port/?replica=aws"; exit 0 ;;
  *"output -raw callback_url") echo "http://127.0.0.1:$port/?replica=aws"; exit 0 ;;
esac
exec "$real_terraform" "\$@"
EOF
cat >"$work/bin/curl" <<EOF
#!/usr/bin/env bash
# A registration with the DSS, answered as the DSS answers; any other request goes out.
case "\$*" in
  *"\$DSS/v1/subscriptions"*)
    python3 -c 'import json, sys, uuid
body = json.load(sys.stdin)
missing = [k for k in ("callback_url", "hmac_key_id", "hmac_secret_key") if not body.get(k)]
if missing:
    sys.exit(f"recipes: the registration lacks {missing}")
print(json.dumps(dict(body, uuid=str(uuid.uuid4()))))' ;;
  *) exec "$real_curl" "\$@" ;;
esac
EOF
cat >"$work/bin/make" <<'EOF'
#!/usr/bin/env bash
echo "recipes: make $*: not run (the example was applied with a placeholder package)"
EOF
chmod +x "$work/bin/"*

# One README's ```sh blocks, in order, with the placeholders filled in.
script_of() {
  python3 - "$1" "$bundle" <<'PY'
import re, sys
path, bundle = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
# Each block with its fence's indentation (a block inside a list item is indented with it).
blocks = re.findall(r"^([ \t]*)```(?:sh|bash)\n(.*?)^[ \t]*```", text, flags=re.S | re.M)
fill = {
    "<bundle uuid>": bundle,
    "0f2a9f8e-1c7b-4d2e-9a57-5b0c8e4d3f21": bundle,
    "<account>": "123456789012",
    "<developers>": "relay-developers",
}
for i, (indent, block) in enumerate(blocks, 1):
    block = "\n".join(line.removeprefix(indent) for line in block.splitlines())
    for placeholder, value in fill.items():
        block = block.replace(placeholder, value)
    print(f"echo {repr(f'recipes: {path}: block {i}')}")
    print(block)
PY
}

export PATH=$(pwd)/$work/bin:$PATH
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_ENDPOINT_URL=$moto AWS_EC2_METADATA_DISABLED=true
export TF_CLI_CONFIG_FILE=$repo/target/moto/cli.tfrc CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
export DSS=https://dss.example.org TOKEN=recipes-token
# `terraform apply` asks for a yes; this answers it.
export TF_CLI_ARGS_apply=-auto-approve
unset RELAY_CONFIG
for readme in "${readmes[@]}"; do
  script_of "$readme" >"$work/$(basename "$(dirname "$readme")").sh"
  echo "recipes: $readme: $(grep -c "^echo 'recipes: " "$work/$(basename "$(dirname "$readme")").sh") blocks"
  if ! (cd "$root" && env -u RELAY_SPLIT_PREFIX bash -euo pipefail "$repo/$work/$(basename "$(dirname "$readme")").sh") \
    >"$work/$(basename "$(dirname "$readme")").log" 2>&1 </dev/null; then
    cat "$work/$(basename "$(dirname "$readme")").log" >&2
    echo "recipes: $readme: a command failed (above)" >&2
    exit 1
  fi
  grep '^recipes: ' "$work/$(basename "$(dirname "$readme")").log" | sed 's/$/: ok/'
  # A split the README left running.
  (cd "$root" && RELAY_ROUTES_URL=$(terraform -chdir=terraform/examples/aws-sqs output -raw routes_url) \
    relay split stop my-test >/dev/null 2>&1) || true
done
echo "recipes: ${#readmes[@]} READMEs run against the example applied to moto"
