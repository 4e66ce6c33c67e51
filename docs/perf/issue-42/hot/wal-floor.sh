#!/bin/bash
# wal-floor.sh: issue 42 step 2 (a Complete as a heap-only update) measured in plain SQL:
# WAL bytes per `new` cycle (one Claim inserting a receipt, one Complete updating it) by
# relation and record type (pg_walinspect), with and without full-page images, for
#
#   today        receipts exactly as migrations/postgres leave them; claimd's batch
#                statements (src/store/postgres/writes.rs): per batch one INSERT … ON
#                CONFLICT DO NOTHING after a pg_advisory_xact_lock per inserted key, one
#                UPDATE of rows locked FOR UPDATE first; tenant_usage counted in the statement
#   step2_ff100  step 2: receipts with its primary key only (the four partial indexes and
#                the generated due_at/terminal_at dropped), orphan discovery in a side table
#                receipts_due (inserted by the Claim, deleted by the Complete), the janitor's
#                completed-with-response list in a side table receipts_responses (inserted
#                by the Complete); fillfactor 100 (claimd's)
#   step2_ff90   the same, fillfactor 90
#   step2_ff50   the same, fillfactor 50 (room on the page for a whole batch's new versions)
#   step2_nolock step2_ff100 without FOR UPDATE (not what the contract allows: shows what
#                the row-lock records cost)
#   step2_created_ff50  step2_ff50 with the janitor on an index of receipts (namespace,
#                created_at) instead of receipts_responses
#   lean         the bench's SQL baseline (bench/src/sql.rs): bench_receipts, CLAIM_INSERT
#                and COMPLETE, each its own transaction
#
# Every arm on fresh tables, after a CHECKPOINT, N cycles; claimd's arms in batches of B (one
# statement, one transaction per batch), each batch's Completes right after its Claims and
# the lean arm's Complete right after its Claim (LAG=0, the default: this order reproduces
# run N's measured records for both claimd and the lean SQL); LAG=32 completes each receipt
# 32 receipts after its Claim (a batch later), as a check of how HOT depends on the order.
# Values and sizes as the bench
# sends them: tenant `default`, namespace `bench`, keys `<run>-new-64-0-<side>-<caller>-<n>`,
# fingerprint SHA-256 of the key, a 30 s lease, response `{"ok":true,"event":"<key>"}`,
# sealed for claimd in format 0x02 (src/seal.rs: format byte, key id 4, nonce 24,
# ciphertext, tag 16), no recovery payload. Autovacuum off on the measured tables so that
# only the statements' own WAL is in the window. Measures WAL records only, no time.
#
# Run as root from anywhere: starts (or reuses) the cluster of cluster.sh.
#   DIR=/tmp/claimd-hot PORT=5498 bash docs/perf/issue-42/hot/wal-floor.sh > wal-floor.txt
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../../.." && pwd)
DIR=${DIR:-/tmp/claimd-hot}; PORT=${PORT:-5498}; DB=${DB:-walfloor}
N=${N:-2048}; B=${B:-32}; LAG=${LAG:-0}
[ $((N % B)) -eq 0 ] && [ $((LAG % B)) -eq 0 ] || { echo "N and LAG must be multiples of B" >&2; exit 1; }
NB=$((N / B)); LAGB=$((LAG / B))
if ! psql -h "$DIR" -p "$PORT" -U postgres -Atc 'select 1' >/dev/null 2>&1; then
    DIR=$DIR PORT=$PORT bash "$ROOT/docs/perf/issue-42/cluster.sh" >/dev/null
fi
psql -h "$DIR" -p "$PORT" -U postgres -qX -c "drop database if exists $DB" -c "create database $DB" 2>/dev/null
P="psql -h $DIR -p $PORT -U postgres -d $DB -X -q -v ON_ERROR_STOP=1 -v B=$B -v N=$N -v NB=$NB -v LAG=$LAG -v LAGB=$LAGB"

$P <<'SQL'
CREATE EXTENSION pg_walinspect;
-- n random bytes (random: a sealed value does not compress, and no value here is TOASTed)
CREATE FUNCTION rb(n int) RETURNS bytea LANGUAGE sql VOLATILE AS $$
    SELECT substr(decode(string_agg(md5(random()::text), ''), 'hex'), 1, n)
    FROM generate_series(0, n / 16) $$;
-- a value sealed as claimd seals it (format 0x02): 1 + 4 + 24 + plaintext + 16 bytes
CREATE FUNCTION sealed(plain bytea) RETURNS bytea LANGUAGE sql VOLATILE AS $$
    SELECT '\x02'::bytea || '\x5ea1c0de'::bytea || rb(24 + octet_length(plain) + 16) $$;
-- the bench's keys (run id, workload, callers, round, side, caller, n) and response
CREATE FUNCTION ckey(i int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('3f9c2a71-new-64-0-claimd-%s-%s', i % 64, i / 64) $$;
CREATE FUNCTION skey(i int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('3f9c2a71-new-64-0-sql-%s-%s', i % 64, i / 64) $$;
CREATE FUNCTION resp(k text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT convert_to('{"ok":true,"event":"' || k || '"}', 'UTF8') $$;
CREATE TABLE runs (arm text PRIMARY KEY, ord int, what text, s pg_lsn, e pg_lsn,
                   heap regclass, upd bigint, hot_upd bigint, rows_done bigint);
-- each arm's WAL records, read right after the arm (the next CHECKPOINT may remove them)
CREATE TABLE w (arm text, rel text, rm text, rt text, len int, fpi int);
SQL

# The receipts of today: every migration, in order, in the arm's schema.
migrations() {
    for f in "$ROOT"/migrations/postgres/*.sql; do echo "\\i $f"; done
}
# No autovacuum on the arm's tables, and the fillfactor of receipts.
settle() {
    cat <<SQL
SELECT format('ALTER TABLE %s SET (autovacuum_enabled = false)', c.oid::regclass)
FROM pg_class c WHERE c.relnamespace = '$1'::regnamespace AND c.relkind = 'r' \gexec
ALTER TABLE receipts SET (fillfactor = $2);
SQL
}

# Step 2's schema change: receipts keeps its primary key only; what the partial indexes
# answered moves to narrow side tables, written only when a receipt enters or leaves them.
step2_ddl() {
    cat <<'SQL'
DROP INDEX receipts_due_idx, receipts_list_idx, receipts_expiry_idx, receipts_response_idx;
ALTER TABLE receipts DROP COLUMN due_at, DROP COLUMN terminal_at;
-- ListOrphaned and the orphan gauge: PROCESSING (due at the lease end) and RETRY_WAIT
-- (due at the retry time) receipts. Written by Claim, Heartbeat, Retry, takeover, Complete,
-- Quarantine: every write that changes a due time. Rows are found by the full index key
-- (the writer knows the due time it replaces), so no second index.
CREATE TABLE receipts_due (tenant_id text COLLATE "C" NOT NULL, due_at timestamptz NOT NULL,
                           namespace text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL);
CREATE INDEX receipts_due_idx ON receipts_due (tenant_id, due_at, namespace, key);
-- The janitor's strips and deletes of COMPLETED receipts that still hold a response
-- (was receipts_response_idx): inserted by Complete, moved to receipts_expiring by a strip.
CREATE TABLE receipts_responses (namespace text COLLATE "C" NOT NULL,
                                 completed_at timestamptz NOT NULL,
                                 tenant_id text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL);
CREATE INDEX receipts_responses_idx ON receipts_responses (namespace, completed_at);
-- QUARANTINED receipts and tombstones by terminal_at (was receipts_expiry_idx), and the
-- dead letters of List (was receipts_list_idx): not written by a `new` cycle.
CREATE TABLE receipts_expiring (namespace text COLLATE "C" NOT NULL,
                                terminal_at timestamptz NOT NULL,
                                tenant_id text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL);
CREATE INDEX receipts_expiring_idx ON receipts_expiring (namespace, terminal_at);
CREATE TABLE receipts_listed (tenant_id text COLLATE "C" NOT NULL, state text NOT NULL,
                              namespace text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL);
CREATE INDEX receipts_listed_idx ON receipts_listed (tenant_id, state, namespace, key);
SQL
}

SIZE_R="(COALESCE(octet_length(r.last_error), 0) + COALESCE(octet_length(r.checkpoint), 0) + COALESCE(octet_length(r.response), 0) + COALESCE(octet_length(r.recovery_payload), 0))"
SIZE_INS="(COALESCE(octet_length(receipts.last_error), 0) + COALESCE(octet_length(receipts.checkpoint), 0) + COALESCE(octet_length(receipts.response), 0) + COALESCE(octet_length(receipts.recovery_payload), 0))"

# claimd's INSERT_MANY for batch $1 (rows $1*B …): the keys' advisory locks, the clock after
# them, the insert, [$1 of this function: more CTEs], the usage count.
claim_stmt() {
    cat <<SQL
PREPARE claim(int) AS
WITH i AS (
    SELECT g AS idx, 'default'::text AS i_tenant, 'bench'::text AS i_ns, public.ckey(g) AS i_key,
           public.rb(16) AS life, gen_random_uuid() AS n_token, gen_random_uuid() AS n_write
    FROM generate_series(\$1 * :B, \$1 * :B + :B - 1) g
),
keyed AS MATERIALIZED (
    SELECT pg_advisory_xact_lock(1668047209, k.h) FROM (
        SELECT DISTINCT hashtext(i.i_tenant || '/' || i.i_ns || '/' || i.i_key) AS h
        FROM i ORDER BY 1
    ) k
),
t AS (SELECT clock_timestamp() AS now FROM (SELECT count(*) FROM keyed) k),
ins AS (
    INSERT INTO receipts (tenant_id, namespace, key, state, attempt, free_attempts, fingerprint,
                          claim_token, lease_expires_at, next_attempt_at, created_at, updated_at,
                          completed_at, last_error, checkpoint, response, recovery_payload, life_id,
                          write_id)
    SELECT i.i_tenant, i.i_ns, i.i_key, 'processing', 1, 0, sha256(convert_to(i.i_key, 'UTF8')),
           i.n_token, t.now + interval '30 seconds', NULL, t.now, t.now,
           NULL, NULL, NULL, NULL, NULL, i.life, i.n_write
    FROM i, t
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING tenant_id, namespace, key, lease_expires_at, $SIZE_INS AS bytes
),$1
used AS (
    INSERT INTO tenant_usage AS u (tenant_id, slot, receipts, stored_bytes)
    SELECT g.tenant, (pg_backend_pid() % 16)::smallint, sum(g.n), sum(g.bytes) FROM (
        SELECT ins.tenant_id, 1, ins.bytes FROM ins
    ) g(tenant, n, bytes)
    GROUP BY g.tenant HAVING sum(g.n) <> 0 OR sum(g.bytes) <> 0 ORDER BY g.tenant
    ON CONFLICT (tenant_id, slot) DO UPDATE SET receipts = u.receipts + excluded.receipts,
        stored_bytes = u.stored_bytes + excluded.stored_bytes
)
SELECT count(*) FROM ins;
SQL
}

# claimd's UPDATE_MANY for the Completes of batch $1: each row locked at the version the
# caller decided from ($2: FOR UPDATE OF r, or nothing), the clock after the locks, the
# update (every column claimd's update sets), [$3: more CTEs], the usage count.
complete_stmt() {
    cat <<SQL
PREPARE complete(int) AS
WITH i AS (
    SELECT g AS idx, 'default'::text AS i_tenant, 'bench'::text AS i_ns, public.ckey(g) AS i_key,
           gen_random_uuid() AS n_write
    FROM generate_series(\$1 * :B, \$1 * :B + :B - 1) g
),
locked AS MATERIALIZED (
    SELECT i.idx, l.old_bytes, l.v_lease FROM i CROSS JOIN LATERAL (
        SELECT $SIZE_R AS old_bytes, r.lease_expires_at AS v_lease FROM receipts r
        WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
          AND r.state = 'processing' AND r.attempt = 1 AND r.free_attempts = 0
        $2
    ) l
),
t AS (SELECT clock_timestamp() AS now FROM (SELECT count(*) FROM locked) l),
upd AS (
    UPDATE receipts r SET
        state = 'completed', attempt = r.attempt, free_attempts = r.free_attempts,
        claim_token = r.claim_token, lease_expires_at = NULL, next_attempt_at = NULL,
        completed_at = t.now, updated_at = t.now,
        last_error = r.last_error, checkpoint = NULL,
        response = public.sealed(public.resp(i.i_key)), recovery_payload = NULL,
        write_id = i.n_write
    FROM i, t
    WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
      AND i.idx IN (SELECT idx FROM locked)
    RETURNING i.idx, r.tenant_id, r.namespace, r.key, r.completed_at, $SIZE_R AS bytes
),$3
used AS (
    INSERT INTO tenant_usage AS u (tenant_id, slot, receipts, stored_bytes)
    SELECT g.tenant, (pg_backend_pid() % 16)::smallint, sum(g.n), sum(g.bytes) FROM (
        SELECT i.i_tenant, 0, upd.bytes - l.old_bytes
        FROM upd JOIN i ON i.idx = upd.idx JOIN locked l ON l.idx = upd.idx
    ) g(tenant, n, bytes)
    GROUP BY g.tenant HAVING sum(g.n) <> 0 OR sum(g.bytes) <> 0 ORDER BY g.tenant
    ON CONFLICT (tenant_id, slot) DO UPDATE SET receipts = u.receipts + excluded.receipts,
        stored_bytes = u.stored_bytes + excluded.stored_bytes
)
SELECT count(*) FROM upd;
SQL
}

STEP2_CLAIM="
due AS (
    INSERT INTO receipts_due (tenant_id, due_at, namespace, key)
    SELECT tenant_id, lease_expires_at, namespace, key FROM ins
),"
STEP2_UNDUE="
undue AS (
    DELETE FROM receipts_due d USING upd JOIN locked l ON l.idx = upd.idx
    WHERE d.tenant_id = upd.tenant_id AND d.due_at = l.v_lease
      AND d.namespace = upd.namespace AND d.key = upd.key
),"
STEP2_COMPLETE="$STEP2_UNDUE
kept AS (
    INSERT INTO receipts_responses (namespace, completed_at, tenant_id, key)
    SELECT namespace, completed_at, tenant_id, key FROM upd
),"

# The load of claimd's arms: batch b's Claims, then the Completes of batch b - LAGB.
claimd_load() {
    cat <<'SQL'
SELECT s FROM (
    SELECT b AS at, 0 AS o, format('EXECUTE claim(%s)', b) AS s FROM generate_series(0, :NB - 1) b
    UNION ALL
    SELECT b + :LAGB, 1, format('EXECUTE complete(%s)', b) FROM generate_series(0, :NB - 1) b
) x ORDER BY at, o \gexec
SQL
}

# One arm: $1 name, $2 order, $3 description, $4 schema setup, $5 statements, $6 load,
# $7 the table whose updates should be HOT.
arm() {
    echo "arm $1 ..." >&2
    {
        echo "CREATE SCHEMA $1; SET search_path = $1, public; SET synchronous_commit = off;"
        echo "$4"
        echo "$5"
        cat <<SQL
SELECT pg_stat_reset();
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS s \gset
$6
SELECT pg_current_wal_insert_lsn() AS e \gset
SET synchronous_commit = on;
SELECT pg_stat_force_next_flush();
SELECT pg_sleep(0.1);
INSERT INTO public.runs (arm, ord, what, s, e, heap, upd, hot_upd, rows_done)
SELECT '$1', $2, \$d\$$3\$d\$, :'s', :'e', '$1.$7'::regclass, n_tup_upd, n_tup_hot_upd,
       (SELECT count(*) FROM $1.$7 WHERE state = 'completed')
FROM pg_stat_user_tables WHERE relid = '$1.$7'::regclass;
INSERT INTO public.w
SELECT '$1', coalesce(CASE WHEN c.relname LIKE 'pg_toast%' THEN 'toast' ELSE c.relname END, '-'),
       w.resource_manager, regexp_replace(w.record_type, '\+INIT', ''), w.record_length, w.fpi_length
FROM pg_get_wal_records_info(:'s', :'e') w
LEFT JOIN pg_class c ON c.relfilenode = (regexp_match(w.block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid
                    AND c.relfilenode <> 0;
SQL
    } | $P >/dev/null
}

TODAY_SETUP="$(migrations)
$(settle today 100)"
arm today 1 "claimd's receipts today (all migrations), FOR UPDATE" "$TODAY_SETUP" \
    "$(claim_stmt "")
$(complete_stmt "" "FOR UPDATE OF r" "")" "$(claimd_load)" receipts

ord=2
for ff in 100 90 50; do
    SETUP="$(migrations)
$(step2_ddl)
$(settle step2_ff$ff $ff)"
    arm step2_ff$ff $ord "step 2: primary key only, side tables, fillfactor $ff, FOR UPDATE" "$SETUP" \
        "$(claim_stmt "$STEP2_CLAIM")
$(complete_stmt "" "FOR UPDATE OF r" "$STEP2_COMPLETE")" "$(claimd_load)" receipts
    ord=$((ord + 1))
done

SETUP="$(migrations)
$(step2_ddl)
$(settle step2_nolock 100)"
arm step2_nolock 5 "step 2, fillfactor 100, no FOR UPDATE (not what the contract allows)" "$SETUP" \
    "$(claim_stmt "$STEP2_CLAIM")
$(complete_stmt "" "" "$STEP2_COMPLETE")" "$(claimd_load)" receipts

# Another janitor design: no receipts_responses; an index on receipts (namespace,
# created_at), written by the Claim and never changed (created_at is not a column a write
# changes, so the Complete stays HOT), the janitor filtering state and completed_at.
# Fillfactor 50, the best case for HOT above.
SETUP="$(migrations)
$(step2_ddl)
CREATE INDEX receipts_created_idx ON receipts (namespace, created_at);
$(settle step2_created_ff50 50)"
arm step2_created_ff50 6 "step 2, janitor by an index on (namespace, created_at) instead of receipts_responses, fillfactor 50, FOR UPDATE" "$SETUP" \
    "$(claim_stmt "$STEP2_CLAIM")
$(complete_stmt "" "FOR UPDATE OF r" "$STEP2_UNDUE")" "$(claimd_load)" receipts

# The lean SQL: bench/src/sql.rs's SCHEMA, CLAIM_INSERT and COMPLETE (token, which the
# bench binds from the claim's answer, read back here), one transaction each.
LEAN_SETUP="CREATE TABLE IF NOT EXISTS bench_receipts (
    key              text PRIMARY KEY,
    fingerprint      bytea NOT NULL,
    token            uuid,
    state            text NOT NULL,
    attempt          integer NOT NULL,
    lease_expires_at timestamptz,
    next_attempt_at  timestamptz,
    response         bytea
) WITH (autovacuum_enabled = false);"
LEAN_STMTS="PREPARE lclaim(int) AS
INSERT INTO bench_receipts (key, fingerprint, token, state, attempt, lease_expires_at)
VALUES (public.skey(\$1), sha256(convert_to(public.skey(\$1), 'UTF8')), gen_random_uuid(),
        'processing', 1, now() + make_interval(secs => 30))
ON CONFLICT (key) DO NOTHING
RETURNING attempt;
PREPARE lcomplete(int) AS
UPDATE bench_receipts
SET state = 'completed', response = public.resp(public.skey(\$1)), lease_expires_at = NULL
WHERE key = public.skey(\$1)
  AND token = (SELECT token FROM bench_receipts WHERE key = public.skey(\$1))
  AND state = 'processing';"
LEAN_LOAD="SELECT s FROM (
    SELECT n AS at, 0 AS o, format('EXECUTE lclaim(%s)', n) AS s FROM generate_series(0, :N - 1) n
    UNION ALL
    SELECT n + :LAG, 1, format('EXECUTE lcomplete(%s)', n) FROM generate_series(0, :N - 1) n
) x ORDER BY at, o \\gexec"
arm lean 7 "the bench's lean SQL (bench_receipts), two transactions per cycle" "$LEAN_SETUP" \
    "$LEAN_STMTS" "$LEAN_LOAD" bench_receipts

# The report: totals, then a table per arm.
$P <<'SQL'
CREATE TABLE tot AS
SELECT r.arm, r.ord, r.what, sum(w.len)::numeric / :N AS b, sum(w.len - w.fpi)::numeric / :N AS nofpi,
       (r.e - r.s)::numeric / :N AS lsn, r.upd, r.hot_upd, r.rows_done
FROM runs r JOIN w ON w.arm = r.arm GROUP BY r.arm, r.ord, r.what, r.e, r.s, r.upd, r.hot_upd, r.rows_done;
SQL
Q="psql -h $DIR -p $PORT -U postgres -d $DB -X -q -v ON_ERROR_STOP=1 -P footer=off"
echo 'WAL per `new` cycle, plain SQL (docs/perf/issue-42/hot/wal-floor.sh)'
echo "N = $N cycles per arm; claimd's arms in batches of $B (one statement and transaction each);"
echo "LAG = $LAG: each Complete $LAG receipts after its Claim (0: right after its own Claim or batch); $($Q -Atc 'show server_version' | cut -d' ' -f1)."
echo "Bytes are pg_walinspect record lengths per cycle; \"without FPI\" leaves out full-page images;"
echo "\"LSN distance\" is the WAL position's advance per cycle (records, alignment and page headers)."
echo
echo "== Totals (ratios to the lean SQL arm; HOT: pg_stat_user_tables of the arm's receipts table)"
$Q -c "
SELECT t.arm, t.rows_done AS completed, round(t.b) AS \"with FPI\", round(t.nofpi) AS \"without FPI\",
       round(t.lsn) AS \"LSN distance\", round(t.b / l.b, 2) AS \"ratio, FPI\",
       round(t.nofpi / l.nofpi, 2) AS \"ratio, no FPI\",
       format('%s of %s (%s %%)', t.hot_upd, t.upd, round(100.0 * t.hot_upd / nullif(t.upd, 0), 1)) AS \"HOT updates\"
FROM tot t, tot l WHERE l.arm = 'lean' ORDER BY t.ord"
for a in $($Q -Atc "select arm from runs order by ord"); do
    echo "== $a: $($Q -Atc "select what from runs where arm = '$a'")"
    $Q -c "
SELECT rel, rm, record, per_cycle, bytes, \"without FPI\" FROM (
    SELECT rel, rm, rt AS record, round(count(*)::numeric / $N, 3) AS per_cycle,
           round(sum(len)::numeric / $N, 1) AS bytes,
           round(sum(len - fpi)::numeric / $N, 1) AS \"without FPI\", 0 AS last
    FROM w WHERE arm = '$a' GROUP BY 1, 2, 3
    UNION ALL
    SELECT 'total', '', '', round(count(*)::numeric / $N, 3), round(sum(len)::numeric / $N, 1),
           round(sum(len - fpi)::numeric / $N, 1), 1 FROM w WHERE arm = '$a'
) x ORDER BY last, bytes DESC, rel, record"
done
