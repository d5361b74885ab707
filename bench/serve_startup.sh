#!/bin/bash
# `make serve` from a fresh copy of this tree (tracked and untracked-but-not-ignored files: no .venv, no build
# output) with an empty RAGNAROK_DATA_DIR: when BM25 first answers and when dense:minilm becomes available,
# with the load average. The new venv installs from whatever pip index and cache the machine has.
#   bash bench/serve_startup.sh [WORKDIR] [PORT]      (default /tmp/serve-startup, 18790)
# WORKDIR/events.log: the figures; WORKDIR/make.log: make's output, each line stamped with seconds since start.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/serve-startup}; PORT=${2:-18790}
CLONE=$WORK/clone; DATA=$WORK/data; LOG=$WORK/events.log
rm -rf "$CLONE" "$DATA"; mkdir -p "$CLONE"
(cd "$SRC" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) \
  | tar -xf - -C "$CLONE"
cd "$CLONE" || exit 1
T0=$(date +%s.%N)
since() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$T0"; }
echo "start $(date -u +%FT%T) load $(cat /proc/loadavg)" > "$LOG"
RAGNAROK_DATA_DIR=$DATA RAGNAROK_PORT=$PORT make serve > >(python3 -u -c '
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    print(f"{time.time() - t0:8.1f} {line}", end="", flush=True)' "$T0" > "$WORK/make.log") 2>&1 &
MAKE=$!
until curl -sf -o /dev/null "localhost:$PORT/v1/retrieve" -H 'content-type: application/json' \
        -d '{"query": "compress a file with gzip", "k": 3}'; do
  kill -0 $MAKE 2>/dev/null || { echo "make exited first" >> "$LOG"; exit 1; }
  sleep 0.5
done
echo "first BM25 answer after $(since) s; load $(cat /proc/loadavg)" >> "$LOG"
while true; do
  state=$(curl -s "localhost:$PORT/v1/retrievers" | python3 -c 'import json, sys
r = [r for r in json.load(sys.stdin) if r["name"] == "dense:minilm"]
print(r[0]["status"], r[0]["reason"]) if r else print("none")')
  echo "$(since) $state | load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOG"
  case "$state" in available*) echo "dense ready after $(since) s; load $(cat /proc/loadavg)" >> "$LOG"; break;; esac
  kill -0 $MAKE 2>/dev/null || { echo "make exited first" >> "$LOG"; exit 1; }
  sleep 15
done
for pid in $(ps -o pid=,args= --ppid $MAKE | awk '/ragnarok serve/ {print $1}'); do kill -TERM "$pid"; done
wait $MAKE
echo "stopped $(date -u +%FT%T)" >> "$LOG"
