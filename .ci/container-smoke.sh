#!/usr/bin/env bash
# Build and run a generated Dockerfile without Docker Hub and without a Docker engine:
# podman + runc, and a Debian base made with debootstrap standing in for python:3.12-slim
# (no image registry is reachable here). Adapted from ../shared/tools/container-smoke.sh.
#
#   .ci/container-smoke.sh setup                  tools, podman config, stand-in base image
#   .ci/container-smoke.sh build CONTEXT TAG      podman build CONTEXT (its FROM replaced by the stand-in)
#   .ci/container-smoke.sh env                    the exports that point podman at this store
#   .ci/container-smoke.sh smoke CONTEXT          build, run with --no-auth, wait for /healthz, initialize
#
# Caches: the stand-in rootfs tarball under $O2M_CONTAINER_CACHE (default <repo>/.cache/container),
# which survives `podman system reset`; the podman store lives there too. Needs apt (Debian mirror)
# for the tools and the stand-in, and PyPI from inside the build (the Dockerfile's `pip install`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${O2M_CONTAINER_CACHE:-$ROOT/.cache/container}
SUITE=${STANDIN_SUITE:-bookworm}          # bookworm -> python3.11, trixie -> python3.13
BASE=localhost/python-standin:$SUITE
t() { local s=$SECONDS; "$@"; echo "[t] $((SECONDS - s))s: $*" >&2; }

export CONTAINERS_STORAGE_CONF="$WORK/cfg/storage.conf" CONTAINERS_CONF="$WORK/cfg/containers.conf"

tools() {
  if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc debootstrap >/dev/null
  fi
}

# private store, runc (crun refuses this hybrid cgroup host), ulimits <= host hard limits, no systemd
config() {
  mkdir -p "$WORK/cfg"
  cat >"$WORK/cfg/storage.conf" <<C
[storage]
driver = "${STORAGE_DRIVER:-overlay}"
graphroot = "$WORK/store"
runroot = "$WORK/run"
C
  cat >"$WORK/cfg/containers.conf" <<C
[containers]
netns = "host"
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
C
  podman info >/dev/null
}

standin() {
  podman image exists "$BASE" && return 0
  local tar="$WORK/standin-$SUITE.tar"
  if [ ! -s "$tar" ]; then
    local r="$WORK/rootfs-$SUITE" mirror
    rm -rf "$r"
    # the Debian mirror this machine's apt already uses (deb822 "URIs:" or one-line "deb URL ...")
    mirror=${DEBIAN_MIRROR:-$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
             | grep -v security | grep -oE 'https?://[^ ]+' | head -n 1 || true)}
    t bash -c "debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        $SUITE $r $mirror >$WORK/debootstrap.log 2>&1"
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "$r"/usr/share/{doc,man,locale}/*
    rm -f "$r"/usr/lib/python3*/EXTERNALLY-MANAGED          # the official image has no PEP 668 marker
    ln -sf python3 "$r/usr/bin/python"
    cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/ca-certificates.crt"  # host CA (TLS-intercepting egress)
    tar -C "$r" -cf "$tar.part" . && mv "$tar.part" "$tar" && rm -rf "$r"
  fi
  t podman import -q --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
      --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
      --change 'ENV PYTHONUNBUFFERED=1' --change 'CMD ["python3"]' "$tar" "$BASE" >/dev/null
}

# one setup at a time (parallel test workers share the cache); the lock goes with the process
setup() { mkdir -p "$WORK"; exec 9>"$WORK/.setup.lock"; flock 9; tools; config; standin; flock -u 9; }

# the generated Dockerfile verbatim; --from replaces its FROM line; docker format keeps HEALTHCHECK
build() {
  local ctx tag=$2
  ctx=$(readlink -f "$1")
  t podman build -q --pull=never --format docker --from "$BASE" --network host -t "$tag" "$ctx" >/dev/null
}

smoke() {
  local port=${SMOKE_PORT:-18765} cid
  setup
  build "$1" localhost/o2m-smoke:latest
  cid=$(podman run -d --network host -e OPENAPI2MCP_PORT="$port" -e OPENAPI2MCP_NO_AUTH=1 \
        -e OPENAPI2MCP_ALLOWED_HOSTS=127.0.0.1,localhost localhost/o2m-smoke:latest)
  trap 'podman rm -f -t 1 "$cid" >/dev/null 2>&1 || true' EXIT
  for _ in $(seq 1 60); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS -X POST "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"smoke","version":"0"}}}' \
    | grep -q '"serverInfo"' && echo "SMOKE OK"
}

case "${1:-}" in
  setup) setup ;;
  build) [ $# -eq 3 ] || { echo "usage: $0 build CONTEXT TAG" >&2; exit 2; }; setup; build "$2" "$3" ;;
  env) echo "export CONTAINERS_STORAGE_CONF='$CONTAINERS_STORAGE_CONF' CONTAINERS_CONF='$CONTAINERS_CONF'" ;;
  smoke) [ $# -eq 2 ] || { echo "usage: $0 smoke CONTEXT" >&2; exit 2; }; smoke "$2" ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
