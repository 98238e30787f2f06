#!/usr/bin/env bash
# Installs the Debian packages streamguard needs to build, test and demo,
# only those that are missing, and the npm packages of tests/sdk (pinned by
# its lock file) when they are not installed.  Idempotent; prints nothing
# when all is present.  It starts no service: the packages that come with
# one (postgresql, nginx) are installed with their start denied, and the
# tests and benchmarks start their own unprivileged instances on loopback.
# Run as root (or with sudo available).
set -euo pipefail

packages=(
  # build
  gcc clang cmake make pkg-config
  # library dependencies
  libcurl4-openssl-dev libnghttp2-dev libc-ares-dev libssl-dev
  # CRC32 of AWS event-stream messages (the decoder, sg-fakemodel)
  zlib1g-dev
  # the OpenTelemetry exporter (SG_WITH_OTEL): protoc-c generates its OTLP
  # messages at build time, libprotobuf-c packs them; protoc decodes them
  # in the tests
  protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
  # the ledger's PostgreSQL backend (libpq), and the server its tests start
  libpq-dev postgresql
  # tests: cmocka, third-party peers (curl, nghttpd, h2load), valgrind,
  # clang's sanitizer and libFuzzer runtimes
  libcmocka-dev curl nghttp2-server nghttp2-client valgrind libclang-rt-14-dev
  # clang-format for the house style; groff to check sg-stream's man page;
  # libabigail's abidw and abidiff for the ABI check (scripts/abi.sh)
  clang-format groff-base abigail-tools
  # the tests' own tools: python3 (an independent event-stream decoder, slow
  # and raw clients), jq (reading report lines), strace (counting
  # sg-proxy's sends per upstream read)
  python3 jq strace
  # the bench's and the demo's peer: nginx as a streaming proxy beside
  # sg-proxy (bench/proxy_nginx.sh starts its own from bench/nginx/)
  nginx
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [ "$status" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
# Node and npm for the providers' official SDKs (tests/sdk), from Debian
# unless some node is on the PATH already.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  # No service starts while the packages install (nginx would listen on
  # port 80): invoke-rc.d and deb-systemd-invoke ask policy-rc.d first,
  # and 101 denies.  Ours only when the machine has none of its own.
  policy=/usr/sbin/policy-rc.d
  own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    own_policy=1
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ -n "$own_policy" ]; then
    $SUDO rm -f "$policy"
    trap - EXIT
  fi
  # A machine whose own policy let it start: the nginx just installed is
  # stopped and not started at boot (the benchmarks start their own).
  if [[ " ${missing[*]} " == *" nginx "* ]]; then
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
      $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
    elif [ -s /run/nginx.pid ]; then
      $SUDO nginx -s stop >/dev/null 2>&1 || true
    fi
  fi
fi

# The SDKs themselves, exactly as tests/sdk/package-lock.json pins them,
# when they are not installed yet (or the lock file changed since).
sdk="$(dirname "$0")/../tests/sdk"
if [ ! -f "$sdk/node_modules/.package-lock.json" ] ||
   [ "$sdk/package-lock.json" -nt "$sdk/node_modules/.package-lock.json" ]; then
  echo "setup: npm ci in tests/sdk" >&2
  (cd "$sdk" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
