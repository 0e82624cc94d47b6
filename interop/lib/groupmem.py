#!/usr/bin/env python3
"""Memory per group and the removal of Empty groups (issue 21): N JoinGroups with new group
ids (one member each, session 2 s), the broker's RSS before and after, then how long until
ListGroups lists none (members expire after 2 s, Empty groups go 2 s later with
--offsets-retention-check-interval-ms 2000). From the repository root, after
`cargo build --release -p consumer-groups-broker`:

    target/interop/venv/bin/python interop/lib/groupmem.py [N]
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kproto
from harness import rss_kib
b = subprocess.Popen(["target/release/broker", "--listen", "127.0.0.1:0", "--topic", "t:1",
                      "--group-min-session-timeout-ms", "1000", "--offsets-retention-check-interval-ms", "2000",
                      "--group-initial-rebalance-delay-ms", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
addr = b.stdout.readline().split("listening on ")[1].strip()
host, port = addr.rsplit(":", 1)
c = kproto.Conn(host, int(port))
c.api_versions()
base = rss_kib(b.pid)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
t = time.time()
for i in range(N):
    r = c.join("g-%d" % i, session_ms=2000)      # MEMBER_ID_REQUIRED: a pending member
    r = c.join("g-%d" % i, member=r["member"], session_ms=2000)   # joins; group of one
print("joined %d groups in %.1f s" % (N, time.time() - t))
time.sleep(0.5)
full = rss_kib(b.pid)
print("RSS %d KiB before, %d KiB with %d groups of one member: %.2f KiB per group+member" % (base, full, N, (full - base) / N))
# members expire after 2 s, groups removed 2 s after they became Empty
deadline = time.time() + 60
def listed():
    c2 = kproto.Conn(host, int(port))
    r = c2.request(16, 0, b"")
    r.i16(); n = r.i32(); c2.close(); return n
while time.time() < deadline:
    n = listed()
    if n == 0: break
    time.sleep(0.5)
print("groups listed after expiry: %d (%.1f s after the joins)" % (n, time.time() - t))
print("RSS then: %d KiB" % rss_kib(b.pid))
b.terminate(); b.wait()
