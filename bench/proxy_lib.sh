# Shared by bench/proxy_nginx.sh, bench/proxy_memory.sh and
# bench/proxy_streams.sh: servers started on loopback in a scratch
# directory ($DIR), each pid in PIDS, all killed and the directory removed
# at exit (KEEP=1 keeps the directory).  Sourced, not run:
#   . "$HERE/proxy_lib.sh" NAME
DIR=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
PIDS=()
bench_cleanup() {
    # TERM first (nginx's master then takes its worker with it), KILL
    # what is left a second later
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    sleep 0.2
    for p in "${PIDS[@]}"; do
        kill -0 "$p" 2>/dev/null && sleep 1 && kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    [ -n "${KEEP:-}" ] || rm -rf "$DIR"
}
trap bench_cleanup EXIT

# port_of PID FILE: the port a server prints alone on its first line.
port_of() {
    for _ in $(seq 1 200); do
        [ -s "$2" ] && head -n 1 "$2" | grep -qx '[0-9]*' && break
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    head -n 1 "$2"
}

# free_port: a loopback port nothing listens on now (nginx takes no port 0).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_fakemodel FM: FM_PORT.
start_fakemodel() {
    "$1" --port 0 --quiet >"$DIR/fm.out" 2>"$DIR/fm.err" &
    PIDS+=($!)
    FM_PORT=$(port_of "$!" "$DIR/fm.out")
    [ -n "$FM_PORT" ] || { echo "sg-fakemodel did not start" >&2; cat "$DIR/fm.err" >&2; exit 2; }
}

# start_nginx [NGINX]: the checked-in bench/nginx/proxy.conf in front of
# FM_PORT, unprivileged, everything it writes in $DIR/nginx; NGX_PORT and
# NGX_PID (its one worker: the process that carries the streams).
start_nginx() {
    local ngx=${1:-nginx} here d
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    d=$DIR/nginx
    mkdir -p "$d"
    NGX_PORT=$(free_port)
    sed -e "s|@DIR@|$d|g" -e "s|@LISTEN@|$NGX_PORT|g" \
        -e "s|@UPSTREAM@|127.0.0.1:$FM_PORT|g" "$here/nginx/proxy.conf" >"$d/nginx.conf"
    "$ngx" -p "$d" -e "$d/error.log" -c "$d/nginx.conf" >"$d/out" 2>&1 &
    local master=$!
    PIDS+=("$master")
    NGX_PID=
    for _ in $(seq 1 200); do
        NGX_PID=$(ps -o pid= --ppid "$master" | head -n 1 | tr -d ' ')
        [ -n "$NGX_PID" ] && curl -s -o /dev/null "http://127.0.0.1:$NGX_PORT/" && break
        kill -0 "$master" 2>/dev/null || break
        sleep 0.05
    done
    [ -n "$NGX_PID" ] || { echo "nginx did not start" >&2; cat "$d/out" "$d/error.log" >&2; exit 2; }
    PIDS+=("$NGX_PID")
}

# start_sgproxy SG_PROXY [ARGS...]: sg-proxy in front of FM_PORT
# (--profile openai); PX_PORT and PX_PID.
start_sgproxy() {
    local px=$1
    shift
    "$px" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$FM_PORT" \
        --profile openai --budget 10m --log "$DIR/px.log" "$@" >"$DIR/px.out" 2>"$DIR/px.err" &
    PX_PID=$!
    PIDS+=("$PX_PID")
    PX_PORT=$(port_of "$PX_PID" "$DIR/px.out")
    [ -n "$PX_PORT" ] || { echo "sg-proxy did not start" >&2; cat "$DIR/px.err" >&2; exit 2; }
}

# cpu_ns PID: the CPU time the process has run, in ns, every thread's
# (schedstat: nanoseconds, not clock ticks).
cpu_ns() {
    cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# median: of the numbers on stdin, one a line or space-separated.
median() {
    tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
