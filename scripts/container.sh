#!/usr/bin/env bash
# Ferry's container image (the repository's Dockerfile) built and run on this machine with
# Debian's podman and runc, for tests/e2e TestContainerImage. Base images cannot be pulled
# here, so the Dockerfile's build arguments point at two local images made from scratch:
# the CI-built ferry binary (BIN_IMAGE, the build stage skipped) and the libc files `ldd`
# names for it (RUN_IMAGE). A user builds the same file with the public bases.
#
#   bash scripts/container.sh install          # apt-get install podman runc when missing
#   eval "$(bash scripts/container.sh start)"  # builds the image, starts the container on
#                                              # free loopback ports (--network=host) with
#                                              # its data volume a host directory; exports
#                                              # FERRY_CONTAINER_IGGY_ADDR, FERRY_CONTAINER_API_URL,
#                                              # FERRY_CONTAINER_DATA, FERRY_CONTAINER_DIR
#   bash scripts/container.sh health           # podman healthcheck run (the image's HEALTHCHECK)
#   bash scripts/container.sh logs             # the container's output
#   bash scripts/container.sh podman ARGS...   # podman with the directory's storage (inspect,
#                                              # exec, stop, start ferry-ci, ...)
#   bash scripts/container.sh stop             # removes the container, the images and the directory
#
# podman keeps its storage and its state under the directory (--root, --runroot, --tmpdir),
# so nothing is left on the machine and two runs at the same time do not meet. CONTAINERS_CONF sets what this machine needs: no default ulimits, the
# cgroupfs manager (no systemd session); runc, because crun refuses hybrid cgroups.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="${FERRY_CONTAINER_STATE:-/tmp/ferry-container.dir}" # where start records its directory

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

pm() {
  local dir=$1
  shift
  CONTAINERS_CONF="$dir/containers.conf" podman --root "$dir/storage" --runroot "$dir/run" \
    --tmpdir "$dir/tmp" --runtime runc --cgroup-manager cgroupfs --events-backend file "$@"
}

case "${1:-}" in
install)
  missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
  ;;
start)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-container.XXXXXX")
  echo "$dir" >"$state"
  mkdir -p "$dir/bin/out/data" "$dir/base" "$dir/data"
  cat >"$dir/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
CONF
  {
    if [ -n "${FERRY_BIN:-}" ]; then
      cp "$FERRY_BIN" "$dir/bin/out/ferry"
    else
      (cd "$root" && go build -ldflags "-X main.Version=$(cat VERSION)" -o "$dir/bin/out/ferry" ./cmd/ferry)
    fi
    # The run base: the libc files the binary loads, nothing else.
    for lib in $(ldd "$dir/bin/out/ferry" | grep -o '/[^ ]*'); do
      cp -L --parents "$lib" "$dir/base/"
    done
    printf 'FROM scratch\nCOPY . /\n' >"$dir/base/Containerfile"
    printf 'FROM scratch\nCOPY out /out\n' >"$dir/bin/Containerfile"
    pm "$dir" build -q -t localhost/ferry-ci-base -f "$dir/base/Containerfile" "$dir/base"
    pm "$dir" build -q -t localhost/ferry-ci-bin -f "$dir/bin/Containerfile" "$dir/bin"
    # --format docker: an OCI image has no HEALTHCHECK.
    pm "$dir" build -q --format docker -t localhost/ferry:ci --build-arg GO_IMAGE=localhost/ferry-ci-bin \
      --build-arg BIN_IMAGE=localhost/ferry-ci-bin --build-arg RUN_IMAGE=localhost/ferry-ci-base \
      -f "$root/Dockerfile" "$root"
  } >"$dir/build.log" 2>&1 || { echo "container.sh: image build failed:" >&2; cat "$dir/build.log" >&2; exit 1; }
  # The volume is written by the image's user (65532).
  chown 65532:65532 "$dir/data"
  iport=$(free_port)
  hport=$(free_port)
  pm "$dir" run -d --name ferry-ci --network=host -v "$dir/data:/var/lib/ferry" \
    -e IGGY_CONNECTORS_IGGY_ADDRESS="127.0.0.1:$iport" -e IGGY_CONNECTORS_EMBEDDED_ADDRESS="127.0.0.1:$iport" \
    -e IGGY_CONNECTORS_HTTP_ADDRESS="127.0.0.1:$hport" localhost/ferry:ci >"$dir/run.log" 2>&1 ||
    { echo "container.sh: podman run failed:" >&2; cat "$dir/run.log" >&2; exit 1; }
  echo "export FERRY_CONTAINER_DIR=$dir"
  echo "export FERRY_CONTAINER_DATA=$dir/data"
  echo "export FERRY_CONTAINER_IGGY_ADDR=127.0.0.1:$iport"
  echo "export FERRY_CONTAINER_API_URL=http://127.0.0.1:$hport"
  ;;
health | logs | podman)
  dir=${FERRY_CONTAINER_DIR:-$(cat "$state")}
  case "$1" in
  health) pm "$dir" healthcheck run ferry-ci ;;
  logs) pm "$dir" logs ferry-ci ;;
  podman) pm "$dir" "${@:2}" ;;
  esac
  ;;
stop)
  dir=${FERRY_CONTAINER_DIR:-$(cat "$state" 2>/dev/null || true)}
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    pm "$dir" rm -f -t 10 ferry-ci >/dev/null 2>&1 || true
    pm "$dir" rmi -a -f >/dev/null 2>&1 || true
    # Unmount what the storage left mounted before removing it.
    umount -R "$dir/storage"/overlay* 2>/dev/null || true
    rm -rf "$dir"
  fi
  rm -f "$state"
  ;;
*)
  echo "usage: $0 install|start|health|logs|podman ARGS...|stop" >&2
  exit 2
  ;;
esac
