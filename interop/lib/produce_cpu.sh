#!/bin/bash
# The broker's CPU for a produce: starts BINARY (with any further broker flags, e.g.
# --data-dir DIR --log-flush-interval-ms 1000) on a free loopback port with one topic
# bench-tput:4, produces 10,000 1 KiB records (warm-up) then 120,000 more with confluent-kafka
# (acks=all, 1 MiB batches), and prints the client's MB/s and the broker's CPU for the
# 120,000, summed over its threads from /proc/PID/task/*/schedstat.
#
#   interop/lib/produce_cpu.sh target/release/broker
#   interop/lib/produce_cpu.sh target/release/broker --data-dir "$(mktemp -d)"
set -u
B=$1; shift
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${INTEROP_PYTHON:-$HERE/../../target/interop/venv/bin/python}
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$B" --listen 127.0.0.1:$PORT --topic bench-tput:4 "$@" > /dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  sleep 0.1
done
timeout 60 $PY "$HERE/produce_load.py" 127.0.0.1:$PORT 10000 > /dev/null 2>&1
cpu() { cat /proc/$PID/task/*/schedstat | awk '{s += $1} END {print s}'; }
t0=$(cpu)
rate=$(timeout 60 $PY "$HERE/produce_load.py" 127.0.0.1:$PORT 120000 2>&1 | tail -1)
t1=$(cpu)
echo "$rate broker CPU ms: $(( (t1 - t0) / 1000000 ))"
