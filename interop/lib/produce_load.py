"""Produces N 1 KiB records to bench-tput (4 partitions, round robin) with confluent-kafka,
acks=all, 1 MiB batches, and prints the rate: `produce_load.py HOST:PORT N`. Used by
produce_cpu.sh."""
import sys
import time

from confluent_kafka import Producer

addr, n = sys.argv[1], int(sys.argv[2])
p = Producer({"bootstrap.servers": addr, "linger.ms": 5, "acks": "all", "batch.size": 1 << 20,
              "queue.buffering.max.messages": 200000})
value = b"v" * 1024
t0 = time.monotonic()
for i in range(n):
    while True:
        try:
            p.produce("bench-tput", value=value, key=b"%08d" % i, partition=i % 4)
            break
        except BufferError:
            p.poll(0.01)
    if i % 1000 == 0:
        p.poll(0)
left = p.flush(60)
dt = time.monotonic() - t0
if left:
    sys.exit("%d records undelivered" % left)
print("MB/s %.1f" % (n * 1024 / 1e6 / dt))
