#!/usr/bin/env bash
# Tests infra/local/lambda-glibc.sh on tiny binaries built with the host's C compiler, no Lambda
# build needed: one that needs only old glibc symbols must pass, one that calls arc4random
# (GLIBC_2.36) must fail against 2.34, as bare binaries and inside a bootstrap.zip, and an x86_64
# binary must fail --arch arm64. Skips (exit 0, with a message) where the host has no C compiler or
# its glibc is older than 2.36.
set -euo pipefail
cd "$(dirname "$0")/../.."
check=infra/local/lambda-glibc.sh
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "lambda-glibc-test: SKIP, no C compiler ($cc)"; exit 0; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <stdio.h>\nint main(void) { puts("old"); return 0; }\n' >"$tmp/old.c"
printf '#include <stdlib.h>\n#include <stdio.h>\nint main(void) { printf("%%u\\n", arc4random()); return 0; }\n' >"$tmp/new.c"
"$cc" -O0 -o "$tmp/old" "$tmp/old.c"
if ! "$cc" -O0 -o "$tmp/new" "$tmp/new.c" 2>/dev/null; then
  echo "lambda-glibc-test: SKIP, the host's glibc has no arc4random (older than 2.36)"
  exit 0
fi
host_arch=$(uname -m)
[[ "$host_arch" == aarch64 ]] && host_arch=arm64 other=x86_64 || other=arm64
(cd "$tmp" && cp new bootstrap && python3 -c 'import zipfile; zipfile.ZipFile("new.zip", "w").write("bootstrap")')

failures=0
expect() { # expect STATUS DESCRIPTION COMMAND...
  local want=$1 what=$2 got=0
  shift 2
  "$@" >"$tmp/out" 2>&1 || got=$?
  if [[ "$got" == "$want" ]]; then
    echo "ok   $what (exit $got)"
  else
    echo "FAIL $what: exit $got, expected $want"; sed 's/^/     /' "$tmp/out"
    failures=$((failures + 1))
  fi
}
expect 0 "a binary needing only old glibc symbols passes 2.34" "$check" --max 2.34 "$tmp/old"
expect 1 "a binary calling arc4random (GLIBC_2.36) fails 2.34" "$check" --max 2.34 "$tmp/new"
expect 1 "the same binary as the bootstrap of a zip fails 2.34" "$check" --max 2.34 "$tmp/new.zip"
expect 0 "the same binary passes when 2.36 is allowed" "$check" --max 2.36 "$tmp/new"
expect 0 "a $host_arch binary passes --arch $host_arch" "$check" --arch "$host_arch" "$tmp/old"
expect 1 "a $host_arch binary fails --arch $other" "$check" --arch "$other" "$tmp/old"
expect 2 "a file that is not ELF is refused" "$check" "$tmp/old.c"
grep -q 'arc4random@GLIBC_2.36' <("$check" --max 2.34 "$tmp/new" 2>&1 || true) \
  && echo "ok   the failure names the symbol (arc4random@GLIBC_2.36)" \
  || { echo "FAIL the failure does not name arc4random@GLIBC_2.36"; failures=$((failures + 1)); }
((failures == 0)) || { echo "lambda-glibc-test: $failures failed"; exit 1; }
echo "lambda-glibc-test: all passed"
