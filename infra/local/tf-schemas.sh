#!/usr/bin/env bash
# Regenerates the provider schemas under tests/terraform/schemas/:
#
#   aws.json     hashicorp/aws 5.100.0
#   google.json  hashicorp/google, the highest v7.x.y tag of its git repository
#
# What they are for. The provider registry is out of reach here (only the AWS provider 5.100 is
# cached, which tf-check.sh validates against), so the hcl-rs tests of terraform/
# (`cargo test --workspace --all-features --test terraform`) read these files to
# check, offline, that every argument and nested block name our modules and examples set exists
# in the provider. Each file holds only the resource, data and ephemeral types we use: every
# `resource`, `data` and `ephemeral` type under terraform/ of that provider, plus the types listed
# below in aws_extra and google_extra (about to be used). Add a type there, or use it in
# terraform/, and run this script again.
#
# Format (JSON, sorted keys and lists, so the same inputs give the same bytes):
#   { "provider": "registry.terraform.io/hashicorp/<name>", "version": "...", "source": "...",
#     "resource": { "<type>": Block }, "data": { "<type>": Block }, "ephemeral": { ... } }
#   Block = { "arguments": [...],      settable attributes (required or optional, computed or not)
#             "computed":  [...],      read-only attributes
#             "blocks":    { "<name>": Block } }   nested blocks
# google.json also has "project_argument" ({"resource.<type>" or "data.<type>": whether its page
# lists a `project` argument}) and "beta_only" ({"<type>": dotted paths of the fields its page
# marks Beta, which only google-beta has; they are left out of the blocks}).
#
# Where they come from.
#   aws.json: `terraform providers schema -json`, run in a temporary directory on a
#     configuration that requires hashicorp/aws = 5.100.0, installed (`terraform init`) from a
#     filesystem mirror of provider packages and nothing else: $TF_PLUGIN_MIRROR, by default
#     /opt/tf-plugins (<mirror>/registry.terraform.io/hashicorp/aws/5.100.0/<os>_<arch>/). Without
#     that package, or without terraform, aws.json is left as it is. Nested attributes
#     (nested_type) would be listed as blocks; none of the types used has one.
#   google.json: no provider binary is at hand, so it is derived from the provider's
#     documentation (website/docs/r/*.html.markdown, d/ for data sources) at a release tag of a
#     clone of hashicorp/terraform-provider-google (bare or not): the first argument, else
#     $GOOGLE_PROVIDER_REPO, else /work/.mirror/hashicorp+terraform-provider-google/repo; the tag
#     is $GOOGLE_PROVIDER_TAG, else the highest v7.x.y (the modules require >= 7.0.0, < 8.0.0).
#     Arguments are the bullets of "Argument Reference", nested blocks the sections their
#     "Structure is documented below" links point to, computed attributes those of "Attributes
#     Reference" and the fields marked (Output) or (Computed); an `_iam_member` type is read from
#     the page of its `_iam` family (member, role, and `condition` where the page has it).
#     infra/local/tf_schemas.py does the reduction.
#
# Limits.
#   - aws.json is the 5.100.0 schema, while the modules require >= 6.29.0, < 7.0.0: arguments
#     added in 6.x are not in it. Those our .tf files set (to be allowed by the test, by name):
#       terraform/modules/aws-relay/main.tf, aws_lambda_permission.function_url_invoke:
#         invoked_via_function_url (6.29.0)
#   - google.json is what the documentation says, not the binary's schema. Fields a page omits
#     are missing (google_storage_bucket documents no terraform_labels, effective_labels or
#     project_number, which the provider exports); every `_iam_member` resource of the binary
#     accepts a `condition` block, but it is listed only where the page documents it; the fields
#     of computed nested objects (terminal_condition of google_cloud_run_v2_service, say) are not
#     described, only their names; a data source documented as "see the google_x resource" gets
#     that resource's field names as computed.
#   - Neither file says which arguments conflict, which values are valid, or which are required.
set -euo pipefail
cd "$(dirname "$0")/../.."

out_dir=tests/terraform/schemas
aws_version=5.100.0
plugin_mirror=${TF_PLUGIN_MIRROR:-/opt/tf-plugins}
google_repo=${1:-${GOOGLE_PROVIDER_REPO:-/work/.mirror/hashicorp+terraform-provider-google/repo}}
google_tag=${GOOGLE_PROVIDER_TAG:-}

# Types about to be used, as kind:type.
aws_extra=(
  resource:aws_cloudwatch_metric_alarm
)
google_extra=(
  resource:google_artifact_registry_repository
  resource:google_artifact_registry_repository_iam_member
  resource:google_logging_metric
  resource:google_monitoring_alert_policy
  resource:google_project_iam_member
  resource:google_pubsub_subscription_iam_member
  resource:google_storage_bucket
  resource:google_storage_bucket_iam_member
  data:google_project
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out_dir"

# Replaces $2 by $1 only when they differ, so an unchanged file keeps its timestamp.
install_file() {
  if cmp -s "$1" "$2"; then
    echo "tf-schemas: $2 unchanged ($(wc -c <"$2") bytes)"
  else
    cp "$1" "$2"
    echo "tf-schemas: wrote $2 ($(wc -c <"$2") bytes)"
  fi
}

# 1. AWS, from the provider package in the filesystem mirror.
aws_package=$plugin_mirror/registry.terraform.io/hashicorp/aws/$aws_version
if ! command -v terraform >/dev/null 2>&1; then
  echo "tf-schemas: terraform is not installed; $out_dir/aws.json left as it is"
elif [ ! -d "$aws_package" ]; then
  echo "tf-schemas: no hashicorp/aws $aws_version under $plugin_mirror; $out_dir/aws.json left as it is"
else
  mkdir -p "$tmp/aws"
  cat >"$tmp/cli.tfrc" <<EOF
provider_installation {
  filesystem_mirror {
    path    = "$plugin_mirror"
    include = ["registry.terraform.io/hashicorp/aws"]
  }
}
EOF
  cat >"$tmp/aws/main.tf" <<EOF
terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "$aws_version"
    }
  }
}
EOF
  export TF_CLI_CONFIG_FILE=$tmp/cli.tfrc CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
  unset TF_PLUGIN_CACHE_DIR TF_DATA_DIR
  if ! terraform -chdir="$tmp/aws" init -input=false -no-color >"$tmp/init.log" 2>&1; then
    cat "$tmp/init.log" >&2
    echo "tf-schemas: terraform init failed" >&2
    exit 1
  fi
  terraform -chdir="$tmp/aws" providers schema -json >"$tmp/aws-schema.json"
  source="terraform providers schema -json of registry.terraform.io/hashicorp/aws $aws_version"
  source+=" (installed from a filesystem mirror), reduced to the types used under terraform/"
  source+=" and by infra/local/tf-schemas.sh"
  python3 infra/local/tf_schemas.py aws \
    --schema "$tmp/aws-schema.json" \
    --version "$aws_version" \
    --source "$source" \
    --tf-dir terraform \
    --extra "${aws_extra[@]}" \
    --out "$tmp/aws.json"
  install_file "$tmp/aws.json" "$out_dir/aws.json"
fi

# 2. Google, from the provider's documentation at a release tag.
if git -C "$google_repo" rev-parse --git-dir >/dev/null 2>&1; then
  python3 infra/local/tf_schemas.py google \
    --repo "$google_repo" \
    ${google_tag:+--tag "$google_tag"} \
    --tf-dir terraform \
    --extra "${google_extra[@]}" \
    --out "$tmp/google.json"
  install_file "$tmp/google.json" "$out_dir/google.json"
else
  echo "tf-schemas: $google_repo is not a git repository of terraform-provider-google; $out_dir/google.json left as it is"
fi
