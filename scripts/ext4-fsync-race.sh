#!/usr/bin/env bash
# Plain SQLite (Python's sqlite3, WAL, synchronous=FULL; nothing of claimd) committing in a
# tight loop (four readers beside it) on an ext4 image mounted errors=remount-ro, while the kernel records an error
# (trigger_fs_error). After unmount, e2fsck and mount, the rows must include every commit
# SQLite was told was durable. docs/RELIABILITY.md ("read-only filesystem under load"):
# on the kernel CI runs on, a commit racing the error is sometimes acknowledged and lost.
# Needs root, e2fsprogs and python3. Usage: scripts/ext4-fsync-race.sh [runs]
set -euo pipefail
runs="${1:-10}"
work="$(mktemp -d)"
trap 'umount "$work/m" 2>/dev/null || true; [ -n "${dev:-}" ] && losetup -d "$dev" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/m"
cat > "$work/loop.py" <<'PY'
import sqlite3, sys, threading, time
path, knob = sys.argv[1], sys.argv[2]
db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
db.execute("pragma journal_mode=wal"); db.execute("pragma synchronous=full")
db.execute("create table t(k integer primary key, v text)")
acked, stop = -1, False
def write():
    global acked
    i = 0
    while not stop:
        try:
            db.execute("begin immediate")
            for j in range(3):
                db.execute("insert into t values (?, ?)", (-(i * 3 + j) - 1, "y" * 3000))
                db.execute("insert into t values (?, ?)", (i * 3 + j, "x" * 300))
            db.execute("commit")
            acked, i = i * 3 + 2, i + 1
        except sqlite3.Error:
            return
def read():
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True, isolation_level=None)
    while not stop:
        try: c.execute("select count(*) from t").fetchone()
        except sqlite3.Error: pass
        time.sleep(0.001)
threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(4)]
for t in threads: t.start()
time.sleep(2); open(knob, "w").write("race\n"); time.sleep(0.5)
stop = True
for t in threads: t.join()
print(acked)
PY
lost=0
for run in $(seq 1 "$runs"); do
  rm -f "$work/img"; truncate -s 64M "$work/img"; mkfs.ext4 -q -F "$work/img"
  dev="$(losetup --find --show "$work/img")"
  mount -t ext4 -o errors=remount-ro "$dev" "$work/m"
  acked="$(python3 "$work/loop.py" "$work/m/db" "/sys/fs/ext4/$(basename "$dev")/trigger_fs_error")"
  umount "$work/m"; e2fsck -f -y "$dev" >/dev/null 2>&1 || true
  mount -t ext4 "$dev" "$work/m"
  kept="$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select max(k) from t').fetchone()[0])" "$work/m/db")"
  umount "$work/m"; losetup -d "$dev"; dev=""
  verdict="kept"; [ "$kept" -lt "$acked" ] && { verdict="LOST"; lost=$((lost + 1)); }
  echo "run $run: last acknowledged row $acked, last row after recovery $kept: $verdict"
done
echo "$lost of $runs runs lost a commit SQLite had acknowledged"
