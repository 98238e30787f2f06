#!/usr/bin/env bash
# Many idle clocks expiring together in sg-proxy: every client is told
# (its in-band idle_timeout written) before any upstream connection is
# torn down, and the upstream sees every stream end while the proxy runs.
#
# How they expire together, without sleeping and hoping: N streams each
# stall after 3 tokens under --idle 2s; once every client holds its 3
# tokens (so every deadline is at most 2 s from that moment, the proxy
# having read each token before its client did), the proxy is stopped
# (SIGSTOP) past the last deadline and continued (SIGCONT): every clock is
# then due in its first pass.  strace records the proxy's syscalls; after
# the SIGCONT, the sends to the clients that carry the idle_timeout must
# all come before the first syscall on an upstream socket (HTTP/1.1: its
# close; h2 on TLS: the RST_STREAM or the connection's close).  Then
# sg-fakemodel must log every stream's end (client_gone) while the proxy
# still runs.  Skipped (77) without strace.
# Usage: sg_proxy_expiry_test.sh SG_PROXY SG_FAKEMODEL
set -u
. "$(dirname "$0")/sg_proxy_lib.sh" "$@" # PX, FM, px_upstream
command -v strace >/dev/null || { echo "skip: strace is not installed"; exit 77; }

px_upstream
N=20
IDLE_S=2

# run LABEL UPSTREAM [sg-proxy options...]
run() {
    local label=$1 up=$2 i t
    shift 2
    local trace=$FM_DIR/$label.trace
    curl -s -X POST "http://127.0.0.1:$FM_PORT/_log/reset" >/dev/null
    strace -f -qq -s 80 -e trace=accept4,socket,connect,sendto,sendmsg,write,writev,close,shutdown \
        -o "$trace" "$PX" --listen 127.0.0.1:0 --upstream "$up" --profile openai \
        --idle "${IDLE_S}s" --log /dev/null "$@" >"$FM_DIR/$label.out" 2>"$FM_DIR/$label.err" &
    local strace_pid=$!
    PX_PIDS+=("$strace_pid")
    touch "$FM_DIR/$label.out"
    PX_PORT=$(read_port "$strace_pid" "$FM_DIR/$label.out" "$FM_DIR/$label.err" \
        "sg-proxy under strace ($label)") || exit 1
    local px_pid
    px_pid=$(ps -o pid= --ppid "$strace_pid" | tr -d ' ')
    PX_PIDS+=("$px_pid")
    local clients=()
    for i in $(seq 1 "$N"); do
        curl -sN -m 60 -X POST -d '{"model":"m","stream":true}' \
            -o "$FM_DIR/$label.$i.body" \
            "http://127.0.0.1:$PX_PORT/v1/chat/completions?n=50&gap=10&stall_after=3&stall=forever&_t=$label$i" &
        clients+=($!)
    done
    # every client holds its 3 tokens (at most 20 s on a loaded machine)
    local held=0
    for _ in $(seq 1 400); do
        held=0
        for i in $(seq 1 "$N"); do
            [ "$(grep -c '"content":"tok' "$FM_DIR/$label.$i.body" 2>/dev/null)" = 3 ] &&
                held=$((held + 1))
        done
        [ "$held" -eq "$N" ] && break
        sleep 0.05
    done
    kill -STOP "$px_pid"
    [ "$held" -eq "$N" ] || fail "$label: $held of $N clients got their 3 tokens"
    local early
    early=$(cat "$FM_DIR/$label".*.body | grep -c idle_timeout)
    [ "$early" -eq 0 ] ||
        fail "$label: $early clients were told before the proxy was stopped (a machine too slow for a ${IDLE_S} s clock)"
    # every deadline is at most IDLE_S after the moment every client held
    # its tokens: past it, the proxy is let go
    sleep "$IDLE_S.3"
    kill -CONT "$px_pid"
    for t in "${clients[@]}"; do
        wait "$t"
    done
    local told
    told=$(cat "$FM_DIR/$label".*.body | grep -c '"code":"idle_timeout"')
    [ "$told" -eq "$N" ] && pass "$label: $N clients told idle_timeout" ||
        fail "$label: $told of $N clients told idle_timeout"
    # the upstream sees every stream end, while the proxy runs (10 s at most)
    local gone=0
    for _ in $(seq 1 200); do
        gone=$(fm_log "event=client_gone" | grep -c '"event":"client_gone"')
        [ "$gone" -ge "$N" ] && break
        sleep 0.05
    done
    [ "$gone" -ge "$N" ] && pass "$label: sg-fakemodel saw all $N streams end" ||
        fail "$label: sg-fakemodel saw $gone of $N streams end while the proxy ran"
    kill -TERM "$px_pid"
    wait "$strace_pid" 2>/dev/null

    # after the SIGCONT: the sends that carry idle_timeout to the clients
    # (accept4's fds) and the first syscall on an upstream socket (socket's
    # fds: sends, writes, shutdown, close)
    read -r answers last_answer first_up up_what < <(awk '
        $2 == "---" && $3 == "SIGCONT" { cont = 1; next }
        {
            split($2, a, "(")
            call = a[1]
            fd = a[2]; sub(/,.*/, "", fd); sub(/\).*/, "", fd)
            ret = $NF
        }
        call == "accept4" && ret ~ /^[0-9]+$/ { kind[ret] = "client"; next }
        call == "socket" && ret ~ /^[0-9]+$/ { kind[ret] = "upstream"; next }
        !cont { if (call == "close") { delete kind[fd] } next }
        {
            n++
            if (kind[fd] == "client" && call == "sendto" && $0 ~ /idle_timeout/) {
                answers++
                last = n
            } else if (kind[fd] == "upstream" && call != "connect" && first == 0) {
                first = n
                what = call
            }
            if (call == "close") { delete kind[fd] }
        }
        END { print answers + 0, last + 0, first + 0, (what == "" ? "none" : what) }' "$trace")
    [ "$answers" -eq "$N" ] && pass "$label: $N answers sent after SIGCONT" ||
        fail "$label: $answers of $N idle_timeout answers sent after SIGCONT"
    if [ "$first_up" -eq 0 ] || [ "$last_answer" -lt "$first_up" ]; then
        pass "$label: every client told (syscall $last_answer after SIGCONT) before the upstream's first teardown ($up_what, syscall $first_up)"
    else
        fail "$label: the first upstream teardown ($up_what, syscall $first_up after SIGCONT) came before the last client was told (syscall $last_answer)"
    fi
}

run http1 "http://127.0.0.1:$FM_PORT"
run h2-tls "https://localhost:$FM_PORT" --cacert "$FM_CA"

fm_finish
