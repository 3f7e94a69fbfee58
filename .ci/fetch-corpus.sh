#!/usr/bin/env bash
# The real-world spec corpus for the robustness tests and benchmarks. Locally it is
# ../shared/corpus; elsewhere (a fresh CI machine) the packed copy in tests/corpus is unpacked
# into .cache/corpus. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${OPENAPI2MCP_CORPUS:-}" ] || [ -d ../shared/corpus ]; then exit 0; fi
[ -s .cache/corpus/github/api.github.com.json ] && exit 0
mkdir -p .cache
tar -xJf tests/corpus/corpus.tar.xz -C .cache
echo "corpus: unpacked tests/corpus/corpus.tar.xz into .cache/corpus" >&2
