#!/usr/bin/env bash
# Debian's Chromium for the catalog's browser test (tests/test_catalog.py renders the HTML catalog
# headless, counts its rows and takes a screenshot). Idempotent: an existing /usr/bin/chromium is
# used as it is; otherwise `apt-get install chromium` (CI runs as root; `apt-get update` only when
# the package lists do not know it yet). Prints the binary's path.
#
#   .ci/chromium.sh
set -euo pipefail

BIN=/usr/bin/chromium
say() { printf 'chromium: %s\n' "$*" >&2; }

if [ -x "$BIN" ]; then
  say "using $BIN ($("$BIN" --version 2>/dev/null | head -n1))"
  echo "$BIN"
  exit 0
fi
command -v apt-get >/dev/null || { say "no $BIN and no apt-get: install Chromium (the catalog test is skipped)"; exit 1; }
export DEBIAN_FRONTEND=noninteractive
say "installing Debian's chromium"
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1 \
  || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; }
"$BIN" --version >&2
echo "$BIN"
