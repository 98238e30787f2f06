#!/usr/bin/env bash
# Endpoint health shared by processes, on a scratch PostgreSQL server
# (pg_lib.sh: initdb into a temporary directory, a Unix socket only).
# Usage: health_pg.sh api TEST
#            starts the server, runs TEST URI "health_pg.sh ctl", stops it
#        health_pg.sh ctl stop|start|freeze|thaw
#            what TEST does to that server mid-run (PG_DIR, PG_BIN and
#            PG_USER come from the api run's environment)
set -u
here=$(cd "$(dirname "$0")" && pwd)
mode=$1
shift
case $mode in
api)
    . "$here/pg_lib.sh"
    trap pg_cleanup EXIT
    pg_start
    export PG_DIR PG_BIN PG_USER
    "$1" "$PG_URI" "bash $here/health_pg.sh ctl"
    exit $?
    ;;
ctl)
    dir=$PG_DIR bin=$PG_BIN user=$PG_USER
    . "$here/pg_lib.sh"
    PG_DIR=$dir PG_BIN=$bin PG_USER=$user
    case $1 in
    stop) pg_stop ;;
    start) pg_start_again ;;
    freeze) pg_freeze ;;
    thaw)
        pm=$(head -n 1 "$PG_DIR/data/postmaster.pid")
        PG_FROZEN="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
        pg_thaw
        ;;
    *) exit 2 ;;
    esac
    ;;
*)
    echo "usage: $0 api TEST | ctl stop|start|freeze|thaw" >&2
    exit 2
    ;;
esac
