#!/usr/bin/env bash
# Static checks of terraform/, offline (the Terraform provider registry is out of reach here):
#
#   1. `terraform fmt -check -recursive terraform/`, skipped with a message where terraform is
#      not installed;
#   2. `terraform init` and `terraform validate` of each AWS module and AWS example, against the
#      AWS provider cached as a filesystem mirror ($TF_PLUGIN_MIRROR, by default /opt/tf-plugins,
#      hashicorp/aws 5.100.0; nothing else is installed), in a temporary copy of terraform/ with
#      an overlay for what 5.100.0 and the offline machine lack (below); plus a probe that calls
#      aws-relay with a one-letter split_prefix and an all-hyphens one, which validate must refuse,
#      next to a good one,
#      which it must accept; and `terraform test` of aws-relay (tests/toggles.tftest.hcl: a plan
#      with every toggle off and one with every toggle on, against a mocked provider). Skipped
#      with a message where terraform or that provider is absent.
#      The GCP configurations are not validated: no Google provider is cached;
#   3. checkov over terraform/ (--skip-download: no platform calls), which fails on any failed
#      check. Every skip is inline in the resource it concerns, with its reason.
#
# The overlay (infra/local/tf_overlay.py, applied to the copy only, says what it rewrites: the
# hashicorp/aws constraint pinned to 5.100.0, the arguments newer than it dropped, 6.0's renamed
# data.aws_region attribute, and hashicorp/random, which is not cached, replaced by a placeholder).
# So validate checks 5.100.0's schema, references, types, expressions and input validations; the
# dropped arguments are checked by name in the hcl-rs tests instead.
#
# checkov is pinned and installed in the venv .venv-checkov at the repo root, once (~1 min).
# The last line is `tf-check: N passed, M failed` (checkov's summary; skipped checks are
# counted apart).
#
# The hcl-rs tests that hold the modules to relay-core are `cargo test -p relay-tests --test
# terraform`.
set -euo pipefail
cd "$(dirname "$0")/../.."

checkov_version=3.3.30
venv=.venv-checkov
report=target/tf-check/checkov.json

# 1. Formatting.
if command -v terraform >/dev/null 2>&1; then
  # The machine image points TF_CLI_CONFIG_FILE at a missing file; fmt needs no configuration.
  if ! TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1 terraform fmt -check -diff -recursive terraform/; then
    echo "tf-check: terraform fmt found unformatted files (run: terraform fmt -recursive terraform/)" >&2
    exit 1
  fi
  echo "tf-check: terraform fmt -check: ok"
else
  echo "tf-check: terraform is not installed; skipping terraform fmt -check (checkov still runs)"
fi

# 2. terraform validate of the AWS configurations, against the cached provider.
aws_version=5.100.0
plugin_mirror=${TF_PLUGIN_MIRROR:-/opt/tf-plugins}
aws_package=$plugin_mirror/registry.terraform.io/hashicorp/aws/$aws_version
aws_roots=(modules/aws-relay modules/aws-queue-grant examples/aws-sqs examples/aws-sqs-fifo-cross-account)
if ! command -v terraform >/dev/null 2>&1; then
  echo "tf-check: terraform is not installed; skipping terraform validate"
elif [ ! -d "$aws_package" ]; then
  echo "tf-check: no hashicorp/aws $aws_version under $plugin_mirror; skipping terraform validate"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tar -C . --exclude=.terraform --exclude=.terraform.lock.hcl --exclude='*.tfstate*' \
    -cf - terraform | tar -C "$work" -xf -
  cat >"$work/cli.tfrc" <<EOF
provider_installation {
  filesystem_mirror {
    path    = "$plugin_mirror"
    include = ["registry.terraform.io/hashicorp/aws"]
  }
}
EOF
  # The probe: aws-relay with a good split_prefix (module "ok") and a one-letter one ("short").
  mkdir -p "$work/terraform/examples/tf-check-split-prefix"
  cat >"$work/terraform/examples/tf-check-split-prefix/main.tf" <<'EOF'
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
}

provider "aws" {
  region = "us-east-1"
}

module "ok" {
  source          = "../../modules/aws-relay"
  name            = "probe-ok"
  lambda_zip_path = "bootstrap.zip"
  routes_enabled  = true
  split_prefix    = "dss-relay-split-"
}

module "short" {
  source          = "../../modules/aws-relay"
  name            = "probe-short"
  lambda_zip_path = "bootstrap.zip"
  routes_enabled  = true
  split_prefix    = "d"
}

module "dashes" {
  source          = "../../modules/aws-relay"
  name            = "probe-dashes"
  lambda_zip_path = "bootstrap.zip"
  routes_enabled  = true
  split_prefix    = "----"
}
EOF
  python3 infra/local/tf_overlay.py "$work/terraform" "$aws_version" | sed 's/^/tf-check: /'
  export TF_CLI_CONFIG_FILE=$work/cli.tfrc CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
  unset TF_PLUGIN_CACHE_DIR TF_DATA_DIR
  validate_failed=0
  # Shows a step's log and what failed, and marks the check failed.
  failed() {
    cat "$1" >&2
    echo "tf-check: $2" >&2
    validate_failed=1
  }
  for dir in "${aws_roots[@]}" examples/tf-check-split-prefix; do
    if ! terraform -chdir="$work/terraform/$dir" init -backend=false -input=false -no-color \
      >"$work/init.log" 2>&1; then
      failed "$work/init.log" "terraform init failed in $dir"
      continue
    fi
    status=0
    terraform -chdir="$work/terraform/$dir" validate -no-color >"$work/validate.log" 2>&1 || status=$?
    if [ "$dir" = examples/tf-check-split-prefix ]; then
      # Exactly two errors, the short prefix's and the all-hyphens prefix's validation.
      errors=$(grep -c '^Error: ' "$work/validate.log" || true)
      if [ "$status" -ne 0 ] && [ "$errors" -eq 2 ] && grep -q 'split_prefix must be' "$work/validate.log" \
        && grep -q 'module "short"\|module.short' "$work/validate.log" \
        && grep -q 'module "dashes"\|module.dashes' "$work/validate.log"; then
        echo "tf-check: terraform validate: split_prefix \"d\" and \"----\" refused, \"dss-relay-split-\" accepted: ok"
      else
        failed "$work/validate.log" "terraform validate should refuse split_prefix \"d\" and \"----\" only"
      fi
    elif [ "$status" -ne 0 ]; then
      failed "$work/validate.log" "terraform validate failed in terraform/$dir (against hashicorp/aws $aws_version, with the overlay)"
    else
      echo "tf-check: terraform validate terraform/$dir: ok"
    fi
  done
  # aws-relay planned with every toggle off and on, against a mocked provider.
  if [ "$validate_failed" -eq 0 ]; then
    # The plan hashes the package; any bytes will do.
    printf 'placeholder' >"$work/terraform/modules/aws-relay/tests/bootstrap.zip"
    if terraform -chdir="$work/terraform/modules/aws-relay" test -no-color >"$work/test.log" 2>&1; then
      echo "tf-check: terraform test terraform/modules/aws-relay (every toggle off, every toggle on, extra_environment's refusals): ok"
    else
      failed "$work/test.log" "terraform test failed in terraform/modules/aws-relay"
    fi
  fi
  if [ "$validate_failed" -ne 0 ]; then
    exit 1
  fi
fi

# 3. checkov, installed once.
if [ "$("$venv/bin/checkov" --version 2>/dev/null || true)" != "$checkov_version" ]; then
  echo "tf-check: installing checkov $checkov_version into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "checkov==$checkov_version"
fi

mkdir -p "$(dirname "$report")"
status=0
"$venv/bin/checkov" -d terraform/ --framework terraform --skip-download --quiet --compact \
  --output json > "$report" || status=$?

# checkov exits 1 when a check failed; anything else without a report is checkov itself failing.
python3 - "$report" "$status" <<'PY'
import json
import sys

path, status = sys.argv[1], int(sys.argv[2])
try:
    with open(path) as f:
        data = json.load(f)
except (OSError, ValueError) as e:
    print(f"tf-check: checkov produced no report (exit {status}): {e}", file=sys.stderr)
    sys.exit(2)
reports = data if isinstance(data, list) else [data]
passed = failed = skipped = parse_errors = 0
for report in reports:
    summary = report.get("summary", {})
    passed += summary.get("passed", 0)
    failed += summary.get("failed", 0)
    skipped += summary.get("skipped", 0)
    parse_errors += summary.get("parsing_errors", 0)
    for check in report.get("results", {}).get("failed_checks", []):
        lines = check.get("file_line_range") or ["?", "?"]
        print(f"FAILED {check['check_id']} {check['resource']} "
              f"({check['file_path']}:{lines[0]}-{lines[1]}): {check.get('check_name', '')}")
if parse_errors:
    print(f"tf-check: checkov could not parse {parse_errors} file(s)", file=sys.stderr)
print(f"tf-check: checkov skipped {skipped} check(s), each with an inline reason")
print(f"tf-check: {passed} passed, {failed} failed")
sys.exit(1 if failed or parse_errors or passed == 0 else 0)
PY
