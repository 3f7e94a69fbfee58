#!/usr/bin/env bash
# The Prometheus server tests/test_telemetry.py scrapes the server with: Debian's `prometheus`
# package, unpacked (not installed: no service, no web-UI dependencies, nothing outside the
# cache) into .cache/prometheus/:
#
#   .cache/prometheus/usr/bin/prometheus     the server binary (a static Go program)
#   .cache/prometheus/.installed             the package version unpacked there
#
# Idempotent: an unpacked binary that runs is not touched, so a CI cache of .cache/prometheus
# makes this a no-op. Needs apt (Debian's archive) the first time; run as root (CI is), or with
# the package lists already fetched.
#
#   .ci/prometheus.sh                        # unpack (or check) it; prints the binary's path
#   OPENAPI2MCP_PROMETHEUS_CACHE=DIR ...     # somewhere else (the tests read the same variable)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${OPENAPI2MCP_PROMETHEUS_CACHE:-$ROOT/.cache/prometheus}
BIN=$CACHE/usr/bin/prometheus

say() { printf 'prometheus: %s\n' "$*" >&2; }

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  say "$(cat "$CACHE/.installed" 2>/dev/null || echo unpacked) already in $CACHE"
  echo "$BIN"
  exit 0
fi
command -v apt-get >/dev/null || { say "apt-get is needed (Debian's prometheus package)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); then
  apt-get update -qq >/dev/null
  (cd "$work" && apt-get download -qq prometheus >/dev/null)
fi
deb=$(ls "$work"/prometheus_*.deb)
rm -rf "$CACHE.part"
mkdir -p "$CACHE.part"
dpkg-deb -x "$deb" "$CACHE.part"
dpkg-deb -f "$deb" Version >"$CACHE.part/.installed"
rm -rf "$CACHE"
mv "$CACHE.part" "$CACHE"
"$BIN" --version 2>&1 | head -n1 >&2
echo "$BIN"
