#!/usr/bin/env bash
# The ledger on a scratch PostgreSQL server (pg_lib.sh).
# Usage: ledger_pg.sh api LEDGER_PG_TEST
set -u
here=$(dirname "$0")
. "$here/pg_lib.sh"
trap pg_cleanup EXIT

mode=$1
shift
case $mode in
api)
    pg_start
    "$1" "$PG_URI"
    exit $?
    ;;
*)
    echo "usage: $0 api TEST" >&2
    exit 2
    ;;
esac
