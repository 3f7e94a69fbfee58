#!/usr/bin/env bash
# Debian's redis-server for the shared-state tests (tests/test_shared_state.py), unpacked under
# .cache/redis/ without installing it system-wide: no service is started, nothing outside the
# cache is touched, and a CI cache of .cache/redis makes this a no-op.
#
#   .ci/redis.sh            # unpack (or check) and print the redis-server path
#
# `apt-get download` fetches redis-server, redis-tools (the binary) and the two libraries it
# links that a slim Debian lacks (libjemalloc2, liblzf1); `dpkg -x` unpacks them into
# .cache/redis/root. The tests run root/usr/bin/redis-server with LD_LIBRARY_PATH pointing at
# root/usr/lib/<arch>. A redis-server already on PATH is used as it is.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${OPENAPI2MCP_REDIS_CACHE:-$ROOT/.cache/redis}
PACKAGES=(redis-server redis-tools libjemalloc2 liblzf1)

say() { printf 'redis: %s\n' "$*" >&2; }

if command -v redis-server >/dev/null 2>&1; then
  say "using $(command -v redis-server) ($(redis-server --version | cut -d' ' -f3))"
  command -v redis-server
  exit 0
fi
BIN=$CACHE/root/usr/bin/redis-server
LIBS=$(ls -d "$CACHE"/root/usr/lib/*-linux-gnu 2>/dev/null | head -n1 || true)
if [ -x "$BIN" ] && LD_LIBRARY_PATH=${LIBS} "$BIN" --version >/dev/null 2>&1; then
  say "already unpacked in $CACHE ($(LD_LIBRARY_PATH=${LIBS} "$BIN" --version | cut -d' ' -f3))"
  echo "$BIN"
  exit 0
fi
command -v apt-get >/dev/null || { say "neither redis-server nor apt-get is here: install Redis 6.2+"; exit 1; }
say "unpacking Debian's ${PACKAGES[*]} into $CACHE"
rm -rf "$CACHE"
mkdir -p "$CACHE/debs"
( cd "$CACHE/debs" && { apt-get download "${PACKAGES[@]}" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get download "${PACKAGES[@]}" >/dev/null; }; } )
for deb in "$CACHE"/debs/*.deb; do dpkg -x "$deb" "$CACHE/root"; done
LIBS=$(ls -d "$CACHE"/root/usr/lib/*-linux-gnu | head -n1)
LD_LIBRARY_PATH=$LIBS "$BIN" --version >&2
echo "$BIN"
