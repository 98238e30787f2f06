#!/usr/bin/env bash
# The layering is enforced, not only described (docs/design.md, "Layers"):
#  1. no layer's sources include a third-party header that is not its own;
#  2. the public headers outside curl.h include no third-party header;
#  3. each layer's include view (build/layers/<layer>) lets it include what
#     it may and refuses what points up or sideways: a compile against the
#     view fails for every forbidden header.  The programs' view
#     (build/layers/tools) holds src/sgx/ alone.  A build without a part
#     (README, "Build options") has no view for its layer: those probes
#     are skipped, and the ones of the layers every build has are not.
# Usage: check.sh SOURCE_DIR BUILD_DIR C_COMPILER
set -euo pipefail
src=$1
build=$2
cc=$3
fail=0
say() { echo "layering: $*" >&2; fail=1; }

# 1. third-party headers per layer (an allow-list: anything else is a leak)
third_party='curl/|nghttp2/|openssl/|ares|zlib|libpq|postgres|jsmn|cmocka|protobuf-c/|opentelemetry/'
allowed() {
  case $1 in
    framing) echo 'zlib' ;;
    curl) echo 'curl/|openssl/' ;;
    h2) echo 'nghttp2/|openssl/|ares' ;;
    ledger) echo 'openssl/|libpq' ;;
    easy) echo 'curl/' ;;
    otel) echo 'curl/|protobuf-c/|opentelemetry/' ;; # (the exporter: libstreamguard-otel)
    *) echo '' ;;
  esac
}
for dir in "$src"/src/*/; do
  layer=$(basename "$dir")
  ok=$(allowed "$layer")
  while IFS= read -r line; do
    hdr=$(sed -E 's/.*#include[[:space:]]*<([^>]+)>.*/\1/' <<<"${line#*:}")
    if [[ $hdr =~ ^($third_party) ]] && { [ -z "$ok" ] || ! [[ $hdr =~ ^($ok) ]]; }; then
      say "src/$layer: ${line%%:*} includes <$hdr>, which is not this layer's"
    fi
  done < <(grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "$dir"*.[ch] || true)
done

# 2. public headers (the unstable ones too): only curl.h may name a
#    third-party header
for h in "$src"/include/streamguard/*.h "$src"/include/streamguard/unstable/*.h; do
  name=${h#"$src"/include/streamguard/}
  [ "$name" = curl.h ] && continue
  if grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<($third_party)" "$h"; then
    say "include/streamguard/$name includes a third-party header"
  fi
done

# 3. each view admits its own and refuses the rest
checked=""
probe() { # layer header want(ok|fail)
  local tmp
  if [ ! -d "$build/layers/$1" ]; then
    case $1 in
      core | framing | policy | sgx) say "no include view for layer $1 in $build/layers" ;;
      *) ;;
    esac
    return
  fi
  case " $checked " in
    *" $1 "*) ;;
    *) checked="$checked $1" ;;
  esac
  tmp=$(mktemp -d)
  printf '#include %s\nint sg_probe_(void);\nint sg_probe_(void) { return 0; }\n' "$2" \
    >"$tmp/probe.c"
  if "$cc" -std=c11 -D_POSIX_C_SOURCE=200809L -fsyntax-only -I "$build/layers/$1" \
       "$tmp/probe.c" 2>/dev/null; then got=ok; else got=fail; fi
  rm -rf "$tmp"
  if [ "$got" != "$3" ]; then
    say "layer $1 including $2: expected $3, got $got"
  fi
}
probe core '<streamguard/core.h>' ok
probe core '<streamguard/policy.h>' fail
probe core '<streamguard/retry.h>' fail
probe core '<streamguard/op.h>' fail
probe core '<streamguard/http.h>' fail
probe core '"policy/internal.h"' fail
# src/sgx/ is every layer's and the programs', and sees no layer's insides
probe core '"sgx/json.h"' ok
probe policy '"sgx/json.h"' ok
probe sgx '"sgx/simd.h"' ok
probe sgx '"core/internal.h"' fail
probe sgx '<streamguard/stream.h>' fail
probe tools '"sgx/json.h"' ok
probe tools '"core/internal.h"' fail
probe framing '<streamguard/stream.h>' ok
probe framing '<streamguard/stream_config.h>' ok
probe framing '<streamguard/policy.h>' fail
probe framing '<streamguard/retry.h>' fail
probe framing '<streamguard/unstable/op.h>' fail
probe policy '"core/internal.h"' ok
probe policy '<streamguard/op.h>' ok
probe policy '<streamguard/retry.h>' ok
probe policy '<streamguard/http.h>' ok
probe policy '<streamguard/unstable/op.h>' ok
probe policy '<streamguard/stream.h>' fail
probe policy '<streamguard/stream_config.h>' fail
probe policy '"transport/lifecycle.h"' fail
probe transport '"transport/lifecycle.h"' ok
probe transport '<streamguard/unstable/op.h>' ok
probe transport '<streamguard/ledger.h>' fail
probe transport '<streamguard/ledger_record.h>' fail
probe transport '"ledger/internal.h"' fail
probe transport '<streamguard/curl.h>' fail
probe transport '<streamguard/curl_multi.h>' fail
probe curl '"transport/lifecycle.h"' ok
probe curl '<streamguard/curl_multi.h>' ok
probe curl '<streamguard/ledger.h>' fail
probe curl '<streamguard/ledger_record.h>' fail
probe curl '<streamguard/h2.h>' fail
probe curl '"h2/internal.h"' fail
probe h2 '<streamguard/ledger.h>' fail
probe h2 '"curl/internal.h"' fail
probe h2 '<streamguard/curl_multi.h>' fail
probe curl '<streamguard/easy.h>' fail
probe ledger '<streamguard/policy.h>' ok
probe ledger '<streamguard/ledger_record.h>' ok
probe ledger '"transport/lifecycle.h"' fail
probe ledger '<streamguard/curl.h>' fail
# The easy handle sees the libcurl transport's public header only (when it
# is built: a build without that transport has no easy view).
if [ -d "$build/layers/easy" ]; then
  probe easy '<streamguard/easy.h>' ok
  probe easy '<streamguard/curl.h>' ok
  probe easy '<streamguard/curl_multi.h>' ok
  probe easy '"curl/internal.h"' fail
  probe easy '"transport/lifecycle.h"' fail
  probe easy '"policy/internal.h"' fail
  probe easy '<streamguard/h2.h>' fail
  probe easy '<streamguard/ledger.h>' fail
fi

# The exporter (libstreamguard-otel, when built) sees the public API of
# the core and the policy - the observer seam - and its own folder; no
# layer of libstreamguard sees it.
if [ -d "$build/layers/otel" ]; then
  probe otel '<streamguard/otel.h>' ok
  probe otel '<streamguard/op.h>' ok
  probe otel '"otel/span.h"' ok
  probe otel '"policy/internal.h"' fail
  probe otel '"transport/lifecycle.h"' fail
  probe otel '<streamguard/curl.h>' fail
  probe otel '<streamguard/ledger.h>' fail
  probe policy '<streamguard/otel.h>' fail
  probe policy '"otel/span.h"' fail
fi

if [ "$fail" -ne 0 ]; then
  echo "1 failed, 0 passed: layering"
  exit 1
fi
echo "layering: every layer includes only what it may (views checked:$checked)"
