#!/usr/bin/env bash
# Static checks of terraform/, offline (the Terraform provider registry is out of reach here, so
# `terraform init/validate/plan` cannot run):
#
#   1. `terraform fmt -check -recursive terraform/`, skipped with a message where terraform is
#      not installed;
#   2. checkov over terraform/ (--skip-download: no platform calls), which fails on any failed
#      check. Every skip is inline in the resource it concerns, with its reason.
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

# 2. checkov, installed once.
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
