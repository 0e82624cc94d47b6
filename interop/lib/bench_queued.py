#!/usr/bin/env python3
"""The broker's RSS while many clients send large frames slowly, with and without
--queued-max-request-bytes (issue 43, item 5). Standard library only; loopback only.

From the repository root, after `cargo build --release -p consumer-groups-broker`:

    python3 interop/lib/bench_queued.py                       # 20 x 100 MiB, bound 200 MiB, then unbounded
    python3 interop/lib/bench_queued.py --broker target/release/broker --clients 20 \
        --frame-mib 100 --bound-mib 200 --rate-mib 25

Each client opens a connection, sends a frame's length prefix (the frame is an ApiVersions v0
request padded with zeros: the broker ignores the bytes after a request's body) and then the
body at --rate-mib MiB/s, and reads the answer. A thread samples the broker's VmRSS
(/proc/PID/status) every 10 ms. Prints, per run, the peak RSS against the bound plus 50 MB,
how many clients were answered and how long the run took. Exits 1 if a bounded run goes past
bound + 50 MB or a client is not answered.
"""

import argparse
import socket
import struct
import subprocess
import sys
import threading
import time

MIB = 1024 * 1024
MB = 1000 * 1000


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def start_broker(path, extra):
    cmd = [path, "--listen", "127.0.0.1:0", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"the broker did not start: {line!r}")
    host, port = line[len("listening on "):].rsplit(":", 1)
    return proc, (host, int(port))


def client(addr, index, frame_bytes, rate, results):
    """Sends one padded ApiVersions v0 frame slowly; records whether it was answered."""
    header = struct.pack(">hhih", 18, 0, index, 1) + b"q"
    chunk = 256 * 1024
    try:
        with socket.create_connection(addr) as s:
            s.sendall(struct.pack(">i", frame_bytes) + header)
            sent = len(header)
            zeros = bytes(chunk)
            while sent < frame_bytes:
                n = min(chunk, frame_bytes - sent)
                began = time.monotonic()
                s.sendall(zeros[:n])  # blocks while the broker is not reading this socket
                sent += n
                # Pace each chunk: no faster than `rate` bytes/s, also after a long block.
                ahead = n / rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
            s.settimeout(120)
            size = struct.unpack(">i", recv_exact(s, 4))[0]
            body = recv_exact(s, size)
            correlation = struct.unpack(">i", body[:4])[0]
            error = struct.unpack(">h", body[4:6])[0]
            results[index] = "answered" if correlation == index and error == 0 else f"bad answer {error}"
    except OSError as e:
        results[index] = f"failed: {e}"


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise OSError("closed by the broker")
        out += got
    return bytes(out)


def run(args, bound_mib):
    extra = ["--queued-max-request-bytes", str(bound_mib * MIB)] if bound_mib else []
    proc, addr = start_broker(args.broker, extra)
    try:
        idle_rss = rss_bytes(proc.pid)
        peak = [idle_rss]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_bytes(proc.pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        results = [None] * args.clients
        started = time.monotonic()
        threads = [
            threading.Thread(
                target=client,
                args=(addr, i, args.frame_mib * MIB, args.rate_mib * MIB, results),
                daemon=True,
            )
            for i in range(args.clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        done.set()
        sampler.join()
        answered = sum(1 for r in results if r == "answered")
        return idle_rss, peak[0], answered, elapsed, [r for r in results if r != "answered"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--broker", default="target/release/broker")
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--frame-mib", type=int, default=100)
    p.add_argument("--bound-mib", type=int, default=200)
    p.add_argument("--rate-mib", type=float, default=25.0, help="each client's send rate, MiB/s")
    p.add_argument("--no-unbounded", action="store_true", help="skip the run without the flag")
    args = p.parse_args()
    ok = True
    runs = [args.bound_mib] + ([] if args.no_unbounded else [0])
    print(f"{args.clients} clients x {args.frame_mib} MiB frames at {args.rate_mib} MiB/s each")
    for bound in runs:
        idle, peak, answered, elapsed, failures = run(args, bound)
        if bound:
            limit = bound * MIB + 50 * MB
            within = peak <= limit
            ok &= within
            what = (f"--queued-max-request-bytes {bound * MIB} ({bound} MiB): peak RSS {peak / MB:.1f} MB"
                    f" vs bound + 50 MB = {limit / MB:.1f} MB ({'within' if within else 'OVER'})")
        else:
            what = f"unbounded (no flag): peak RSS {peak / MB:.1f} MB"
        ok &= answered == args.clients
        print(f"{what}; idle {idle / MB:.1f} MB; answered {answered}/{args.clients}; {elapsed:.1f} s")
        for f in failures[:5]:
            print(f"  {f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
