#!/usr/bin/env bash
# sg-proxy beside nginx: CPU per streamed item, of the proxy and of the
# client behind it.
#
#   bench/proxy_nginx.sh SG_PROXY SG_FAKEMODEL [ITEMS] [RUNS] [NGINX]
#
# One sg-fakemodel (ITEMS OpenAI-shaped SSE chunks, ~182 bytes each, as
# fast as they are read; default 1000000), and in front of it nginx
# (bench/nginx/proxy.conf: proxy_buffering off, HTTP/1.1 upstream
# keepalive; unprivileged, loopback) and sg-proxy (--profile openai).  One
# client at a time (curl -sN), RUNS rounds (default 5), each round: the
# stream straight from sg-fakemodel, then through nginx, then through
# sg-proxy.  Per run: the proxy process's CPU (user+system, from
# /proc/PID/task/*/schedstat) and the client's (bash time), per item, and
# the bytes the client got (every run must get the direct run's).  Prints
# the medians and the median of each round's sg-proxy/nginx ratio.
set -u
PX=$1
FM=$2
ITEMS=${3:-1000000}
RUNS=${4:-5}
NGINX=${5:-nginx}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/proxy_lib.sh" sg-proxy-nginx

start_fakemodel "$FM"
start_nginx "$NGINX"
start_sgproxy "$PX"
path="/v1/chat/completions?n=$ITEMS&gap=0"

# run NAME PORT PID: one stream through PORT; appends to the samples.
declare -A proxy client bytes
run() {
    local before after t
    before=$([ -n "$3" ] && cpu_ns "$3" || echo 0)
    local TIMEFORMAT='%3U %3S'
    { time curl -sN -o /dev/null -w '%{size_download}\n' "http://127.0.0.1:$2$path" \
        >"$DIR/size"; } 2>"$DIR/t"
    after=$([ -n "$3" ] && cpu_ns "$3" || echo 0)
    [ -z "${DEBUG:-}" ] || echo "$1 $3 $before $after $(cat "$DIR/size")" >&2
    t=$(awk '{ printf "%.0f", ($1 + $2) * 1e9 }' "$DIR/t")
    proxy[$1]="${proxy[$1]:-} $(((after - before) / ITEMS))"
    client[$1]="${client[$1]:-} $((t / ITEMS))"
    bytes[$1]="${bytes[$1]:-} $(cat "$DIR/size")"
    LAST_PROXY=$(((after - before) / ITEMS))
    LAST_CLIENT=$((t / ITEMS))
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
rp=""
rc=""
for r in $(seq 1 "$RUNS"); do
    run direct "$FM_PORT" ""
    run nginx "$NGX_PORT" "$NGX_PID"
    np=$LAST_PROXY nc=$LAST_CLIENT
    run sg-proxy "$PX_PORT" "$PX_PID"
    rp="$rp $(ratio "$LAST_PROXY" "$np")"
    rc="$rc $(ratio "$LAST_CLIENT" "$nc")"
done

# every stream whole: the bytes of the direct one, but for the digits of
# sg-fakemodel's response counter in each event's id (chatcmpl-9, -10)
whole=yes
want=$(echo "${bytes[direct]}" | awk '{ print $1 }')
for n in direct nginx sg-proxy; do
    for b in ${bytes[$n]}; do
        [ $(((b - want) % ITEMS)) = 0 ] || whole=no
    done
done
printf '%-9s %14s %15s   %s\n' path "proxy ns/item" "client ns/item" "samples: proxy | client (ns/item)"
for n in direct nginx sg-proxy; do
    printf '%-9s %14s %15s   %s |%s\n' "$n" "$([ "$n" = direct ] && echo - || echo "${proxy[$n]}" | median)" \
        "$(echo "${client[$n]}" | median)" "$([ "$n" = direct ] && echo - || echo "${proxy[$n]# }")" "${client[$n]}"
done
echo "sg-proxy/nginx, each round: proxy$rp; client$rc"
echo "sg-proxy/nginx, median of the rounds: proxy $(echo "$rp" | median)x, client $(echo "$rc" | median)x"
echo "items=$ITEMS runs=$RUNS bytes=$want whole=$whole"
[ "$whole" = yes ]
