#!/usr/bin/env bash
# The ledger on a scratch PostgreSQL server (pg_lib.sh).
# Usage: ledger_pg.sh api TEST [ARGS...]   (runs TEST URI ARGS...)
#        ledger_pg.sh cli SG_STREAM SG_FAKEMODEL
set -u
here=$(dirname "$0")
. "$here/pg_lib.sh"
trap pg_cleanup EXIT

mode=$1
shift
case $mode in
api)
    pg_start
    test=$1
    shift
    "$test" "$PG_URI" "$@"
    exit $?
    ;;
cli)
    . "$here/ledger_pg_cli.sh"
    ;;
*)
    echo "usage: $0 api TEST | cli SG_STREAM SG_FAKEMODEL" >&2
    exit 2
    ;;
esac
