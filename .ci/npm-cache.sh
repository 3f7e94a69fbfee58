# Sourced by the .ci scripts that install Node tools under .cache/node ($CACHE; `say` defined by the
# caller): `ensure DIR PACKAGE VERSION` installs PACKAGE@VERSION into $CACHE/DIR unless a matching
# version is there (VERSION: exact, or a major "22" / major.minor "0.2" prefix).

# installed_version DIR PACKAGE -> prints the installed version, or nothing
installed_version() {
  local pj="$1/node_modules/$2/package.json"
  [ -f "$pj" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pj" | head -n1
}

# matches VERSION WANTED
matches() {
  case "$1" in
    "$2" | "$2".*) return 0 ;;
    *) return 1 ;;
  esac
}

# ensure DIR PACKAGE VERSION
ensure() {
  local dir="$CACHE/$1" pkg="$2" want="$3" have
  have=$(installed_version "$dir" "$pkg")
  if [ -n "$have" ] && matches "$have" "$want"; then
    say "$pkg $have already installed in $dir"
    return 0
  fi
  say "installing $pkg@$want into $dir${have:+ (replacing $have)}"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || printf '{"name":"openapi2mcp-%s","private":true}\n' "$1" >"$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "$pkg@$want" >&2)
}
