#!/usr/bin/env bash
# The real-world spec corpus for the robustness tests. Locally it is ../shared/corpus; a fresh CI
# machine has only package registries, so the biggest spec (GitHub's REST description, 13 MB,
# 1,223 operations; MIT) is taken from its npm package into .cache/corpus. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${OPENAPI2MCP_CORPUS:-}" ] || [ -d ../shared/corpus ]; then exit 0; fi
dest=.cache/corpus/github
[ -s "$dest/api.github.com.json" ] && exit 0
mkdir -p "$dest" .cache/npm-pack
(cd .cache/npm-pack && npm pack -q @octokit/openapi@23.0.2 >/dev/null)
tar -xzf .cache/npm-pack/octokit-openapi-23.0.2.tgz -C .cache/npm-pack package/generated/api.github.com.json
mv .cache/npm-pack/package/generated/api.github.com.json "$dest/"
rm -rf .cache/npm-pack
echo "corpus: fetched GitHub's REST description into $dest" >&2
