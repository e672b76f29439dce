#!/usr/bin/env bash
# Build the job image (deploy/kubernetes/Dockerfile) with buildah where the official base images
# cannot be pulled (no Docker Hub, no ghcr.io): it first builds local stand-ins for the Dockerfile's
# three *_IMAGE build arguments, from sources this machine reaches (docs/kubernetes.md, "Building the
# image"):
#   localhost/pwevent-build/debian:bookworm  Debian 12 by debootstrap from Debian's mirror
#   localhost/flink-base:<flink>             deploy/kubernetes/local-base/Containerfile: that Debian +
#                                            the Flink distribution of PyFlink's pip package (from
#                                            the project's .venv) in the official image's layout
#   localhost/pwevent-build/jdk:17           local-base/Containerfile.jdk: Debian's OpenJDK 17 JDK
#   localhost/pwevent-build/uv:<uv>          /uv out of uv's wheel on PyPI (the ghcr.io image's file)
# then the Dockerfile itself. Each local image is built once and reused; the job image every time.
#
#   deploy/local/build-image.sh [TAG]        TAG default localhost/pwevent:dev
# Needs: root, buildah and debootstrap (Debian: apt-get install buildah debootstrap), the set-up
# .venv (deploy/local/setup.sh), network access to Debian's mirror, PyPI and Maven Central.
# Environment:
#   PWEVENT_IMAGE_STORAGE   container storage (default <repo>/.cache/containers; not the system's)
#   PWEVENT_IMAGE_CACHE     debootstrap tarball, build contexts (default <repo>/.cache/image)
#   PWEVENT_DEBIAN_MIRROR   default http://deb.debian.org/debian
#   PWEVENT_BUILDAH_ISOLATION  oci (default) or chroot; PWEVENT_STORAGE_DRIVER overlay (default) or vfs
#   PWEVENT_BUILD_CA        a CA bundle mounted over the build containers' ca-certificates.crt
#                           while they run (apt, uv; not stored in any image), with uv told to use
#                           it: for TLS-intercepting proxies. Default /etc/ssl/certs/ca-certificates.crt
#                           (this machine's trust); empty: none
#   PWEVENT_OCI_RUNTIME     default runc (apt-get install runc): crun 1.8 (Debian 12) refuses a
#                           host with cgroup v1 and v2 mounted side by side ("cgroups in hybrid mode
#                           not supported")
# Prints the seconds each step took and, last, the image's name.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TAG="${1:-localhost/pwevent:dev}"
STORAGE="${PWEVENT_IMAGE_STORAGE:-$REPO_ROOT/.cache/containers}"
CACHE="${PWEVENT_IMAGE_CACHE:-$REPO_ROOT/.cache/image}"
MIRROR="${PWEVENT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKERFILE="$REPO_ROOT/deploy/kubernetes/Dockerfile"
LOCAL_BASE="$REPO_ROOT/deploy/kubernetes/local-base"
PYTHON="$REPO_ROOT/.venv/bin/python"
DEBIAN_PACKAGES="ca-certificates,openjdk-17-jre-headless,python3.11,libpython3.11,libjemalloc-dev,gettext-base,libsnappy1v5"

die() { echo "build-image: $*" >&2; exit 1; }
for tool in buildah debootstrap unzip "${PWEVENT_OCI_RUNTIME:-runc}"; do command -v "$tool" >/dev/null || die "$tool not found (apt-get install $tool)"; done
[[ "$(id -u)" == 0 ]] || die "run as root (debootstrap, and buildah with its default isolation)"
[[ -x "$PYTHON" ]] || die "no $PYTHON: run deploy/local/setup.sh first"

B=(buildah --root "$STORAGE/root" --runroot "$STORAGE/run" --storage-driver "${PWEVENT_STORAGE_DRIVER:-overlay}")
BUD=(bud --network host --isolation "${PWEVENT_BUILDAH_ISOLATION:-oci}" --runtime "${PWEVENT_OCI_RUNTIME:-runc}" --layers)
CA="${PWEVENT_BUILD_CA-/etc/ssl/certs/ca-certificates.crt}"
if [[ -n "$CA" ]]; then
  [[ -f "$CA" ]] || die "PWEVENT_BUILD_CA: no file $CA"
  BUD+=(--volume "$CA:/etc/ssl/certs/ca-certificates.crt:ro" --build-arg UV_NATIVE_TLS=true)
fi
has_image() { "${B[@]}" inspect --type image "$1" >/dev/null 2>&1; }
step() { echo "build-image: $1 ($(( SECONDS - started )) s)"; started=$SECONDS; }
started=$SECONDS

# The versions the Dockerfile names: Flink's from its base image, uv's from its image tag.
FLINK_VERSION="$(sed -n 's/^ARG FLINK_IMAGE=flink:\([0-9.]*\)-.*/\1/p' "$DOCKERFILE")"
UV_VERSION="$(sed -n 's/^ARG UV_IMAGE=.*:\([0-9.]*\)$/\1/p' "$DOCKERFILE")"
[[ -n "$FLINK_VERSION" && -n "$UV_VERSION" ]] || die "cannot read FLINK_IMAGE/UV_IMAGE versions from $DOCKERFILE"
PYFLINK="$("$PYTHON" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
have="$("$PYTHON" -c 'from importlib.metadata import version; print(version("apache-flink-libraries"))')"
[[ "$have" == "$FLINK_VERSION" ]] || die "the venv's apache-flink-libraries is $have, the Dockerfile's Flink $FLINK_VERSION"

DEBIAN_IMAGE=localhost/pwevent-build/debian:bookworm
BASE_IMAGE="localhost/flink-base:$FLINK_VERSION"
JDK_IMAGE=localhost/pwevent-build/jdk:17
UV_IMAGE="localhost/pwevent-build/uv:$UV_VERSION"
mkdir -p "$CACHE" "$STORAGE"

# --- Debian 12 root file system -----------------------------------------------------------------
if ! has_image "$DEBIAN_IMAGE"; then
  tarball="$CACHE/debian-bookworm.tar"
  if [[ ! -f "$tarball" ]]; then
    rm -rf "$CACHE/rootfs.tmp"
    debootstrap --variant=minbase --include="$DEBIAN_PACKAGES" bookworm "$CACHE/rootfs.tmp" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 || { tail -n 20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$CACHE"/rootfs.tmp/var/cache/apt/archives/*.deb "$CACHE"/rootfs.tmp/var/lib/apt/lists/*
    tar -C "$CACHE/rootfs.tmp" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$CACHE/rootfs.tmp"
  fi
  ctr="$("${B[@]}" from scratch)"
  tar -C "$("${B[@]}" mount "$ctr")" --numeric-owner -xf "$tarball"
  "${B[@]}" umount "$ctr" >/dev/null
  "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
  "${B[@]}" commit --quiet --rm "$ctr" "$DEBIAN_IMAGE" >/dev/null
  step "$DEBIAN_IMAGE"
fi

# --- the local Flink base --------------------------------------------------------------------------
if ! has_image "$BASE_IMAGE"; then
  context="$CACHE/base-context"
  rm -rf "$context" && mkdir -p "$context/flink"
  for part in bin conf lib opt plugins licenses log; do
    [[ -e "$PYFLINK/$part" ]] && cp -a "$PYFLINK/$part" "$context/flink/"
  done
  find "$context/flink" -name '__pycache__' -prune -exec rm -rf {} +
  cp "$LOCAL_BASE/docker-entrypoint.sh" "$context/"
  "${B[@]}" "${BUD[@]}" --quiet --build-arg DEBIAN="$DEBIAN_IMAGE" -f "$LOCAL_BASE/Containerfile" \
    -t "$BASE_IMAGE" "$context" >/dev/null
  step "$BASE_IMAGE"
fi

# --- a JDK for the jvm stage -------------------------------------------------------------------------
if ! has_image "$JDK_IMAGE"; then
  mkdir -p "$CACHE/empty"
  "${B[@]}" "${BUD[@]}" --quiet --build-arg DEBIAN="$DEBIAN_IMAGE" -f "$LOCAL_BASE/Containerfile.jdk" \
    -t "$JDK_IMAGE" "$CACHE/empty" >/dev/null
  step "$JDK_IMAGE"
fi

# --- uv, the binary of the ghcr.io image, from its PyPI wheel --------------------------------------
if ! has_image "$UV_IMAGE"; then
  wheels="$CACHE/uv-$UV_VERSION"
  if ! ls "$wheels"/uv-*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --platform musllinux_1_1_x86_64 \
      -d "$wheels" "uv==$UV_VERSION"
  fi
  rm -rf "$wheels/x" && unzip -q -o "$wheels"/uv-*.whl "uv-$UV_VERSION.data/scripts/uv" -d "$wheels/x"
  ctr="$("${B[@]}" from scratch)"
  "${B[@]}" copy --chmod 0755 "$ctr" "$wheels/x/uv-$UV_VERSION.data/scripts/uv" /uv >/dev/null
  "${B[@]}" commit --quiet --rm "$ctr" "$UV_IMAGE" >/dev/null
  step "$UV_IMAGE"
fi

# --- the job image -------------------------------------------------------------------------------------
# buildah 1.28 leaves a working container behind for each stage used only by `COPY --from` (flink,
# uv): the ones this build created are removed, by id.
before="$("${B[@]}" containers --quiet --notruncate | sort)"
"${B[@]}" "${BUD[@]}" --build-arg FLINK_IMAGE="$BASE_IMAGE" --build-arg JDK_IMAGE="$JDK_IMAGE" \
  --build-arg UV_IMAGE="$UV_IMAGE" -f "$DOCKERFILE" -t "$TAG" "$REPO_ROOT"
left="$(comm -13 <(echo "$before") <("${B[@]}" containers --quiet --notruncate | sort))"
[[ -z "$left" ]] || xargs "${B[@]}" rm <<<"$left" >/dev/null
step "$TAG"
echo "$TAG"
