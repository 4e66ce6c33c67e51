#!/bin/bash
# A private PostgreSQL 15 cluster for the runs of issue 42: pg_stat_statements and
# pg_walinspect, everything else default. Run as root; prints the URL for --database-url.
# DIR (default /tmp/claimd-perf) holds the data directory and the socket; PORT default 5499.
set -e
DIR=${DIR:-/tmp/claimd-perf}; PORT=${PORT:-5499}; BIN=/usr/lib/postgresql/15/bin
mkdir -p "$DIR"; chown postgres "$DIR"
[ -d "$DIR/data" ] || su postgres -c "$BIN/initdb -U postgres --auth=trust -D $DIR/data" >/dev/null
su postgres -c "$BIN/pg_ctl -D $DIR/data -l $DIR/log -w start -o '-c listen_addresses= \
  -c port=$PORT -k $DIR -c max_connections=200 -c shared_preload_libraries=pg_stat_statements'" >/dev/null
psql -h "$DIR" -p "$PORT" -U postgres -c 'create database bench' 2>/dev/null || true
psql -h "$DIR" -p "$PORT" -U postgres -d bench -qc 'create extension if not exists pg_stat_statements' \
  -c 'create extension if not exists pg_walinspect'
echo "postgres://postgres@localhost:$PORT/bench?host=$DIR"
