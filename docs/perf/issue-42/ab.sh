#!/bin/bash
# ab.sh A B NAME [claimd-bench flags]: builds A and B (directories with claimd and
# claimd-bench) run alternately, A B A B, with the same flags; prints claimd's rows and the
# batch statements' pg_stat_statements lines of each run.
A=$1; B=$2; N=$3; shift 3; HERE=$(dirname "$0")
for i in 1 2; do for s in "$A" "$B"; do
  "$HERE/run.sh" "$N-$(basename "$s")-$i" "$s" "$@"
done; done
for s in "$A" "$B"; do for i in 1 2; do
  echo "== $s #$i"; grep -E "^(postgres|sqlite) " "$N-$(basename "$s")-$i.out"
  awk -F'|' '$2 > 1000 {print "   calls="$1" rows="$2" us/row="$3" us/call="$4" wal/row="$5" :: "$6}' \
    "$N-$(basename "$s")-$i.pgss" | grep -i "with c\|select i.idx"
done; done
