#!/usr/bin/env bash
# pg-cluster.sh start|stop DIR: a private PostgreSQL cluster in DIR (Unix socket only).
# Used by tests that take a database down and up again; prints the conninfo on start.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
case "${1:-}" in
    start) pg_start "$2" ;;
    stop) pg_stop "$2" "${3:-fast}" ;;
    *) die "usage: pg-cluster.sh start|stop DIR [mode]" ;;
esac
