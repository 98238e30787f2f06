#!/usr/bin/env bash
# Installs the Debian packages streamguard needs to build, test and demo,
# only those that are missing.  Idempotent; prints nothing when all is present.
# Run as root (or with sudo available).
set -euo pipefail

packages=(
  # build
  gcc clang cmake make pkg-config
  # library dependencies
  libcurl4-openssl-dev libnghttp2-dev libc-ares-dev libssl-dev
  # tests: cmocka, third-party peers (curl, nghttpd, h2load), valgrind,
  # clang's sanitizer and libFuzzer runtimes
  libcmocka-dev curl nghttp2-server nghttp2-client valgrind libclang-rt-14-dev
  # clang-format for the house style; groff to check sg-stream's man page
  clang-format groff-base
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [ "$status" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
