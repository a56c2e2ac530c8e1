#!/usr/bin/env bash
# Checks that a Lambda bootstrap runs on the glibc of its runtime: the highest GLIBC_x.y symbol
# version the binary needs must be at most MAX (2.34, the glibc of provided.al2023).
#
#   infra/local/lambda-glibc.sh [--max 2.34] [--arch arm64|x86_64] FILE...
#
# FILE is the bootstrap binary or a bootstrap.zip (its `bootstrap` entry is checked). With --arch,
# the binary must also be of that instruction set. Prints one line per file and exits 1 if any
# file needs a newer glibc (or is of the wrong instruction set), 2 on bad usage or an unreadable
# file. Uses readelf, which reads ELF files of any instruction set.
set -euo pipefail

max=2.34
arch=
files=()
while (($#)); do
  case "$1" in
    --max) max="${2:?--max needs a version}"; shift 2 ;;
    --arch) arch="${2:?--arch needs arm64 or x86_64}"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "lambda-glibc: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
((${#files[@]})) || { echo "usage: $0 [--max 2.34] [--arch arm64|x86_64] FILE..." >&2; exit 2; }
[[ "$max" =~ ^[0-9]+(\.[0-9]+)+$ ]] || { echo "lambda-glibc: --max $max is not a version" >&2; exit 2; }
case "$arch" in
  "") machine= ;;
  arm64) machine=AArch64 ;;
  x86_64) machine="Advanced Micro Devices X86-64" ;;
  *) echo "lambda-glibc: --arch must be arm64 or x86_64, not $arch" >&2; exit 2 ;;
esac
command -v readelf >/dev/null || { echo "lambda-glibc: readelf not found (binutils)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The larger of two versions, compared field by field as numbers (2.9 < 2.17 < 2.34).
newer() { printf '%s\n%s\n' "$1" "$2" | sort -t. -k1,1n -k2,2n -k3,3n | tail -n1; }

status=0
for file in "${files[@]}"; do
  binary="$file"
  if [[ "$file" == *.zip ]]; then
    binary="$tmp/bootstrap"
    unzip -p "$file" bootstrap >"$binary" 2>/dev/null && [[ -s "$binary" ]] \
      || { echo "lambda-glibc: $file: no bootstrap entry in the zip" >&2; exit 2; }
  fi
  header=$(readelf -h "$binary" 2>/dev/null) \
    || { echo "lambda-glibc: $file: not an ELF file" >&2; exit 2; }
  if [[ -n "$machine" ]] && ! grep -q "Machine: *$machine\$" <<<"$header"; then
    got=$(sed -n 's/^ *Machine: *//p' <<<"$header")
    echo "lambda-glibc: FAIL $file: built for $got, expected $arch" >&2
    status=1
    continue
  fi
  # Every version the binary asks of the C library: the version needs (.gnu.version_r) and the
  # versioned dynamic symbols. GLIBC_PRIVATE and other libraries' versions do not match.
  versions=$(readelf -W --version-info --dyn-syms "$binary" \
    | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/^GLIBC_//' | sort -u)
  highest=
  for v in $versions; do highest=$(newer "${highest:-0}" "$v"); done
  if [[ -z "$highest" ]]; then
    echo "lambda-glibc: ok $file: needs no versioned glibc symbol (static or not linked to glibc)"
    continue
  fi
  if [[ "$(newer "$highest" "$max")" == "$max" ]]; then
    echo "lambda-glibc: ok $file: highest glibc symbol version GLIBC_$highest (at most $max)"
  else
    echo "lambda-glibc: FAIL $file: needs GLIBC_$highest, newer than $max; symbols above $max:" >&2
    readelf -W --dyn-syms "$binary" | grep -oE '[^ ]+@GLIBC_[0-9.]+' | while IFS=@ read -r sym ver; do
      v=${ver#GLIBC_}
      [[ "$(newer "$v" "$max")" == "$max" ]] || echo "  $sym@$ver" >&2
    done
    status=1
  fi
done
exit "$status"
