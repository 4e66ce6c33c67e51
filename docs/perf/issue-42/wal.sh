#!/bin/bash
# wal.sh BINDIR: WAL records per new cycle @64 by relation and record type (pg_walinspect):
# count, bytes, and bytes without full-page images (those follow a checkpoint, not the write).
# DB (default bench) is the database claimd and the SQL baseline write to.
B=$1; DIR=${DIR:-/tmp/claimd-perf}; PORT=${PORT:-5499}; DB=${DB:-bench}
P="psql -h $DIR -p $PORT -U postgres -d $DB -qAt"
$P -c "create extension if not exists pg_walinspect" >/dev/null
S=$($P -c "select pg_current_wal_lsn()")
"$B/claimd-bench" --database-url "postgres://postgres@localhost:$PORT/$DB?host=$DIR" --claimd "$B/claimd" --workload new --callers 64 --rounds 1 --seconds 3 > wal.out 2>&1
E=$($P -c "select pg_current_wal_lsn()")
# cycles per side: the rows each side inserted
CL=$($P -c "select count(*) from pg_get_wal_records_info('$S','$E') r join pg_class c on c.relfilenode = (regexp_match(block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid where c.relname='receipts' and record_type like 'INSERT%' and resource_manager='Heap'")
SQ=$($P -c "select count(*) from pg_get_wal_records_info('$S','$E') r join pg_class c on c.relfilenode = (regexp_match(block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid where c.relname='bench_receipts' and record_type like 'INSERT%' and resource_manager='Heap'")
echo "claimd cycles $CL, sql cycles $SQ"
$P -F'|' -c "
with r as (select resource_manager rm, record_type rt, record_length len, fpi_length fpi, xid, (regexp_match(block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid fn from pg_get_wal_records_info('$S','$E')),
x as (select distinct r.xid, c.relname like 'bench%' sql from r join pg_class c on c.relfilenode = r.fn where c.relname like '%receipts%')
select case when x.sql then 'sql' else 'claimd' end side, coalesce(c.relname, '-') rel, rm, regexp_replace(rt, '\+INIT','') rt,
  round(count(*)::numeric / case when x.sql then $SQ else $CL end, 2) per_cycle,
  round(sum(len)::numeric / case when x.sql then $SQ else $CL end) bytes_per_cycle,
  round(sum(len - fpi)::numeric / case when x.sql then $SQ else $CL end) without_full_page_images
from r join x on x.xid = r.xid left join pg_class c on c.relfilenode = r.fn
group by 1,2,3,4, x.sql order by 1, 6 desc"
