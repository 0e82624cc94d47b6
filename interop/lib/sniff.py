#!/usr/bin/env python3
"""Which API versions does each client request? A logging proxy in front of the mock cluster.

    sniff.py [--clients kafka-python,aiokafka,confluent,kafkajs]

Starts the mock (advertising the broker's API version ranges, and the proxy's address in
Metadata so that every connection goes through the proxy), runs a small workload per client
(produce 20 records; a one-member group that consumes and commits them; close) and prints, per
client, the (API, versions) it sent. The client id of each request tells which client sent it.
kafka-python is started with api_version=(2, 3) against the mock (see README, mock notes): it
then uses Kafka 2.3's version table, not the ranges advertised.
"""
import argparse
import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kproto  # noqa: E402
from harness import INTEROP, Broker, node_exe, python_exe  # noqa: E402

seen = defaultdict(lambda: defaultdict(set))   # client id -> api name -> {versions}


async def pipe(reader, writer, parse):
    buf = b""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if parse:
                buf += data
                while len(buf) >= 4:
                    size = struct.unpack(">i", buf[:4])[0]
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4:4 + size], buf[4 + size:]
                    key, ver = struct.unpack(">hh", frame[:4])
                    n = struct.unpack(">h", frame[8:10])[0]
                    cid = frame[10:10 + n].decode(errors="replace") if n >= 0 else None
                    seen[cid][kproto.API_NAMES.get(key, str(key))].add(ver)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def run_proxy(listen_sock, upstream, ready):
    async def handle(r, w):
        try:
            ur, uw = await asyncio.open_connection(*upstream)
        except OSError:
            w.close()
            return
        await asyncio.gather(pipe(r, uw, True), pipe(ur, w, False))

    async def main():
        server = await asyncio.start_server(handle, sock=listen_sock)
        ready.set()
        async with server:
            await server.serve_forever()
    asyncio.run(main())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="kafka-python,aiokafka,confluent,kafkajs")
    a = ap.parse_args()
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    proxy_port = ls.getsockname()[1]
    logdir = os.path.join(os.path.dirname(INTEROP), "target", "interop", "sniff")
    os.makedirs(logdir, exist_ok=True)
    mock = Broker([python_exe(), os.path.join(INTEROP, "lib", "mockcluster.py"), "--api-versions-like-broker",
                   "--advertise", "127.0.0.1:%d" % proxy_port],
                  ["--topic", "sniff:2"], os.path.join(logdir, "mock.log"), name="mock")
    upstream = kproto.split_hostport(mock.start(30))
    ready = threading.Event()
    threading.Thread(target=run_proxy, args=(ls, upstream, ready), daemon=True).start()
    ready.wait(10)
    addr = "127.0.0.1:%d" % proxy_port
    for client in a.clients.split(","):
        for role, extra in (("produce", {"topics": ["sniff"], "count": 20, "prefix": "sn-" + client}),
                            ("consume", {"group": "sniff-" + client, "topics": ["sniff"]})):
            spec = dict(bootstrap=addr, label="%s-%s" % (client, role), kafka_python_api_version=[2, 3], **extra)
            if client == "kafkajs":
                cmd = [node_exe(), os.path.join(INTEROP, "workers", "jsclient.js"), "--role", role, "--spec", json.dumps(spec)]
            else:
                cmd = [python_exe(), os.path.join(INTEROP, "workers", "pyclient.py"), "--client", client,
                       "--role", role, "--spec", json.dumps(spec)]
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            deadline = time.monotonic() + 30
            got = 0
            for line in p.stdout:
                ev = json.loads(line) if line.startswith("{") else {}
                if ev.get("ev") == "recs":
                    got += len(ev["r"])
                if ev.get("ev") == "done" or got >= 20 or time.monotonic() > deadline or ev.get("fatal"):
                    break
            try:
                p.stdin.write("stop\n")
                p.stdin.flush()
            except OSError:
                pass
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    mock.stop(10)
    for cid in sorted(k for k in seen if k):
        print(cid)
        for api in sorted(seen[cid]):
            print("    %-16s %s" % (api, sorted(seen[cid][api])))


if __name__ == "__main__":
    main()
