#!/usr/bin/env bash
# Install the third-party REST servers the `thirdparty` test tier runs, each in a venv of its own
# under .cache/thirdparty/ (so the product's .venv never gets their dependencies):
#
#   .cache/thirdparty/chroma/    chromadb 1.5.9       (the Rust server inside the wheel; --no-deps)
#   .cache/thirdparty/jupyter/   jupyter-server 2.21.1
#   .cache/thirdparty/kinto/     kinto 26.5.0
#   .cache/thirdparty/prefect/   prefect 3.9.1
#
# The versions, and every dependency's, are pinned by the lock files in .ci/thirdparty/NAME.txt
# (`pip freeze` of the venv the tests were written against). Idempotent: a venv whose marker
# holds the lock file's digest is not touched, so a CI cache of .cache/thirdparty makes this a
# no-op; a changed lock file reinstalls that server alone.
#
#   .ci/thirdparty.sh                      # install (or check) every server
#   .ci/thirdparty.sh kinto chroma         # only these
#   OPENAPI2MCP_THIRDPARTY_CACHE=DIR ...   # install somewhere else (tests read the same variable)
#   PYTHON=python3.12 ...                  # the interpreter of the venvs (default: python3)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${OPENAPI2MCP_THIRDPARTY_CACHE:-$ROOT/.cache/thirdparty}
PY=${PYTHON:-python3}
LOCKS=$ROOT/.ci/thirdparty
ALL=(chroma jupyter kinto prefect)

say() { printf 'thirdparty: %s\n' "$*" >&2; }

digest() { sha256sum "$1" | cut -d' ' -f1; }

# ensure NAME: the venv .cache/thirdparty/NAME with exactly the lock file's packages
ensure() {
  local name="$1" lock="$LOCKS/$1.txt" dir="$CACHE/$1" want have extra=()
  [ -f "$lock" ] || { say "no lock file $lock (known: ${ALL[*]})"; return 1; }
  want=$(digest "$lock")
  have=$(cat "$dir/.installed" 2>/dev/null || true)
  if [ "$have" = "$want" ] && [ -x "$dir/bin/python" ]; then
    say "$name already installed in $dir"
    return 0
  fi
  say "installing $name into $dir${have:+ (lock file changed)}"
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  # chroma: the server binary only; the lock file says why
  [ "$name" = chroma ] && extra=(--no-deps)
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-input "${extra[@]}" -r "$lock" >&2
  echo "$want" >"$dir/.installed"
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
mkdir -p "$CACHE"
for name in "${names[@]}"; do
  ensure "$name"
done

for name in "${names[@]}"; do
  # the version each venv really has (what the tests run)
  case "$name" in
    chroma) pkg=chromadb ;; jupyter) pkg=jupyter_server ;; *) pkg=$name ;;
  esac
  say "$name $("$CACHE/$name/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$pkg")"
done
