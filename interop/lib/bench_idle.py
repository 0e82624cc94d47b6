#!/usr/bin/env python3
"""RSS per idle connection of one or more broker binaries, side by side: each broker is started
on a loopback port, served one warm-up connection, then N connections that each send one
ApiVersions and stay open; the figure is the RSS growth divided by N (KiB). The brokers run one
after the other in the order given, so `A B A B` alternates them.

    bench_idle.py [--connections N] BROKER...
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kproto  # noqa: E402
from bench import rss_kib  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_connection(binary, n):
    port = free_port()
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:%d" % port],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while True:
            try:
                warm = kproto.Conn("127.0.0.1", port, timeout=10)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        warm.api_versions()
        warm.close()
        time.sleep(0.5)
        base = rss_kib(p.pid)
        conns = []
        for _ in range(n):
            c = kproto.Conn("127.0.0.1", port, timeout=10)
            c.api_versions()
            conns.append(c)
        time.sleep(0.5)
        after = rss_kib(p.pid)
        for c in conns:
            c.close()
        return (after - base) / n
    finally:
        p.terminate()
        p.wait(timeout=15)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("brokers", nargs="+")
    a = ap.parse_args()
    for b in a.brokers:
        print("%-40s %.2f KiB per idle connection" % (b, per_connection(b, a.connections)), flush=True)


if __name__ == "__main__":
    main()
