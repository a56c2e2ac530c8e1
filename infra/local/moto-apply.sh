#!/usr/bin/env bash
# Applies terraform/examples/aws-sqs to moto (infra/local/emulators.sh must be running), as a
# user applies it to AWS, with one more sender beside the DSS: relay_config names the DSS's
# source (on the callback path, with the module's keys) and a GitHub source, whose secret is in
# Secrets Manager (source_secret_arns). What it deployed is then run:
#
#   - tests/it/deployed.rs invokes relay-lambda's handler with the deployed function's
#     environment, read back from moto's Lambda, as `cargo lambda invoke` would: a DSS
#     notification signed with the secret the module generated, and a GitHub delivery;
#   - infra/local/recipes.sh runs the READMEs' commands in the applied example.
#
# Offline: terraform with the AWS provider cached on this machine (hashicorp/aws 5.100.0 as a
# filesystem mirror, $TF_PLUGIN_MIRROR, through infra/local/tf_overlay.py), against moto's
# endpoints (a provider override file in the copy), and a placeholder bootstrap.zip: moto keeps
# the package and runs nothing. Each run uses a new relay name, so a moto that already holds an
# earlier run's resources takes the next one beside them.
#
# Writes target/moto/ (the applied copy of terraform/ and its state) and target/moto/aws-sqs.json:
#   {"dir": the applied example, "name": the relay's name, "outputs": `terraform output -json`,
#    "environment": the function's variables, "github_secret": {"arn", "value"}}
# Skipped with a message, and no file written, where terraform or the provider is absent.
set -euo pipefail
cd "$(dirname "$0")/../.."

moto=http://127.0.0.1:${MOTO_PORT:-5000}
aws_version=5.100.0
plugin_mirror=${TF_PLUGIN_MIRROR:-/opt/tf-plugins}
out=target/moto
summary=$out/aws-sqs.json
rm -f "$summary"
if ! command -v terraform >/dev/null 2>&1; then
  echo "moto-apply: terraform is not installed; skipping (tests/it/deployed.rs and recipes.sh say so)"
  exit 0
fi
if [ ! -d "$plugin_mirror/registry.terraform.io/hashicorp/aws/$aws_version" ]; then
  echo "moto-apply: no hashicorp/aws $aws_version under $plugin_mirror; skipping"
  exit 0
fi
if ! curl -fsS -o /dev/null "$moto/moto-api/"; then
  echo "moto-apply: moto does not answer on $moto (infra/local/emulators.sh start)" >&2
  exit 1
fi

rm -rf "$out/terraform"
mkdir -p "$out"
tar -C . --exclude=.terraform --exclude=.terraform.lock.hcl --exclude='*.tfstate*' \
  -cf - terraform | tar -C "$out" -xf -
python3 infra/local/tf_overlay.py "$out/terraform" "$aws_version" | sed 's/^/moto-apply: /'
example=$out/terraform/examples/aws-sqs

# moto's endpoints for every service the module calls, with its test credentials.
services=(cloudwatch cloudwatchlogs dynamodb firehose iam kms lambda s3 secretsmanager sns sqs sts)
{
  echo 'provider "aws" {'
  echo '  region                      = "us-east-1"'
  echo '  access_key                  = "test"'
  echo '  secret_key                  = "test"'
  echo '  skip_credentials_validation = true'
  echo '  skip_metadata_api_check     = true'
  echo '  skip_requesting_account_id  = true'
  echo '  s3_use_path_style           = true'
  echo '  endpoints {'
  for service in "${services[@]}"; do echo "    $service = \"$moto\""; done
  echo '  }'
  echo '}'
} >"$example/moto_override.tf"

# The package: any zip, with the architecture `make lambda` records beside it.
python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("bootstrap", "#!/bin/sh\n")' "$out/bootstrap.zip"
echo x86_64 >"$out/architecture"

export AWS_ENDPOINT_URL=$moto AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_EC2_METADATA_DISABLED=true
name=relay-moto-$(date +%s)
# The GitHub webhook's secret, created as its owner would, before the relay that reads it.
github_value=$(python3 -c 'import secrets; print(secrets.token_hex(20))')
github_arn=$(aws --endpoint-url "$moto" secretsmanager create-secret --name "$name-github" \
  --secret-string "$github_value" --query ARN --output text)
cat >"$example/moto.auto.tfvars.json" <<EOF
{
  "name": "$name",
  "lambda_zip_path": "$(pwd)/$out/bootstrap.zip",
  "reserved_concurrency": null,
  "relay_config": "[sources.dss]\nscheme = \"dss\"\npaths = [\"/\"]\n\n[sources.github]\nscheme = \"github\"\npaths = [\"/github\"]\nsecret_arn = \"$github_arn\"\n",
  "source_secret_arns": {"github": "$github_arn"}
}
EOF

cat >"$out/cli.tfrc" <<EOF
provider_installation {
  filesystem_mirror {
    path    = "$plugin_mirror"
    include = ["registry.terraform.io/hashicorp/aws"]
  }
}
EOF
export TF_CLI_CONFIG_FILE=$(pwd)/$out/cli.tfrc CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
unset TF_PLUGIN_CACHE_DIR TF_DATA_DIR
started=$(date +%s)
terraform -chdir="$example" init -input=false -no-color >"$out/init.log" 2>&1 ||
  { cat "$out/init.log" >&2; echo "moto-apply: terraform init failed" >&2; exit 1; }
terraform -chdir="$example" apply -auto-approve -input=false -no-color >"$out/apply.log" 2>&1 ||
  { tail -60 "$out/apply.log" >&2; echo "moto-apply: terraform apply failed ($out/apply.log)" >&2; exit 1; }
grep '^Apply complete' "$out/apply.log" | sed "s/^/moto-apply: $name: /;s/\$/ ($(($(date +%s) - started)) s)/"

terraform -chdir="$example" output -json >"$out/outputs.json"
aws --endpoint-url "$moto" lambda get-function-configuration --function-name "$name" >"$out/function.json"
python3 - "$summary" "$(pwd)/$example" "$name" "$out/outputs.json" "$out/function.json" \
  "$github_arn" "$github_value" <<'PY'
import json
import sys

summary, example, name, outputs, function, arn, value = sys.argv[1:]
with open(outputs, encoding="utf-8") as f:
    outputs = {k: v["value"] for k, v in json.load(f).items()}
with open(function, encoding="utf-8") as f:
    environment = json.load(f)["Environment"]["Variables"]
with open(summary, "w", encoding="utf-8") as f:
    json.dump({"dir": example, "name": name, "outputs": outputs, "environment": environment,
               "github_secret": {"arn": arn, "value": value}}, f, indent=2)
PY
echo "moto-apply: $summary"
