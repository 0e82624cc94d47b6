#!/usr/bin/env python3
"""librdkafka's mock cluster as a stand-alone process, with the broker's command line.

    mockcluster.py --listen 127.0.0.1:0 [--topic NAME:PARTITIONS]... [--num-partitions N]
                   [--group-initial-rebalance-delay-ms N] [--brokers N] [--api-versions-like-broker]

It loads the librdkafka shared object bundled in the confluent-kafka wheel, creates a mock
cluster through ctypes, prints `listening on HOST:PORT` on stdout (one line, flushed) and
stays up until SIGTERM/SIGINT, then exits 0. Options of the real broker that the mock has no
counterpart for (--data-dir, --group-*-session-timeout-ms, --max-frame-bytes, ...) are accepted
and ignored, with a note on stderr, so the suite can start either with the same arguments.

The mock listens on an ephemeral loopback port of its own choosing: --listen is accepted for
symmetry, its port must be 0.
"""
import argparse
import ctypes
import glob
import os
import signal
import sys
import threading

# The broker's advertised maxima (the contract in interop/README.md). With
# --api-versions-like-broker the mock advertises the same ranges, so clients negotiate the
# versions they will use against our broker.
BROKER_API_VERSIONS = {
    0: (0, 7),    # Produce
    1: (0, 11),   # Fetch
    2: (0, 3),    # ListOffsets
    3: (0, 12),   # Metadata
    8: (0, 9),    # OffsetCommit
    9: (0, 9),    # OffsetFetch
    10: (0, 1),   # FindCoordinator
    11: (0, 5),   # JoinGroup
    12: (0, 1),   # Heartbeat
    13: (0, 1),   # LeaveGroup
    14: (0, 3),   # SyncGroup
    15: (0, 1),   # DescribeGroups
    16: (0, 5),   # ListGroups
    18: (0, 3),   # ApiVersions (the mock stays at its own 0-2)
    22: (0, 4),   # InitProducerId
    24: (0, 3),   # AddPartitionsToTxn
    25: (0, 3),   # AddOffsetsToTxn
    26: (0, 3),   # EndTxn
    28: (0, 3),   # TxnOffsetCommit
    42: (0, 1),   # DeleteGroups
    68: (0, 1),   # ConsumerGroupHeartbeat
    69: (0, 1),   # ConsumerGroupDescribe
}


def find_librdkafka():
    import confluent_kafka  # noqa: F401  (locates the wheel)
    base = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    for pattern in ("confluent_kafka.libs/librdkafka*.so*", "confluent_kafka/.libs/librdkafka*.so*",
                    "confluent_kafka.libs/librdkafka*.dylib"):
        hits = sorted(glob.glob(os.path.join(base, pattern)))
        if hits:
            return hits[0]
    raise SystemExit("mockcluster: no librdkafka shared object next to confluent_kafka in " + base)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--topic", action="append", default=[])
    ap.add_argument("--num-partitions", type=int, default=None)
    ap.add_argument("--group-initial-rebalance-delay-ms", type=int, default=0)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--api-versions-like-broker", action="store_true")
    ap.add_argument("--advertise", help="HOST:PORT the (single) mock broker advertises in Metadata "
                                        "(a proxy in front of it, e.g. interop/lib/sniff.py)")
    # accepted and ignored: no counterpart in the mock
    for flag in ("--data-dir", "--group-min-session-timeout-ms", "--group-max-session-timeout-ms",
                 "--group-max-size", "--max-frame-bytes", "--max-connections"):
        ap.add_argument(flag)
    # the consumer group protocol's (KIP-848) heartbeat interval and session, set on the mock
    # where its librdkafka has the setters
    ap.add_argument("--group-consumer-heartbeat-interval-ms", type=int, default=None)
    ap.add_argument("--group-consumer-session-timeout-ms", type=int, default=None)
    ap.add_argument("--auto-create-topics", action="store_true")
    args = ap.parse_args()

    host, _, port = args.listen.rpartition(":")
    if port not in ("0", ""):
        print("mockcluster: the mock picks its own port; --listen must end in :0", file=sys.stderr)
        return 2
    ignored = [f for f in ("data_dir", "group_min_session_timeout_ms", "group_max_session_timeout_ms",
                           "group_max_size", "max_frame_bytes", "max_connections") if getattr(args, f)]
    if ignored:
        print("mockcluster: ignoring (no counterpart in the mock): " + ", ".join(ignored), file=sys.stderr)

    lib = ctypes.CDLL(find_librdkafka())
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.restype = None
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_set_apiversion.restype = ctypes.c_int
    lib.rd_kafka_mock_set_apiversion.argtypes = [ctypes.c_void_p, ctypes.c_int16, ctypes.c_int16, ctypes.c_int16]
    lib.rd_kafka_mock_broker_set_host_port.restype = ctypes.c_int
    lib.rd_kafka_mock_broker_set_host_port.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_err2str.restype = ctypes.c_char_p

    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
    rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # RD_KAFKA_PRODUCER
    if not rk:
        print("mockcluster: rd_kafka_new failed: " + errstr.value.decode(), file=sys.stderr)
        return 1
    mc = lib.rd_kafka_mock_cluster_new(rk, args.brokers)
    if not mc:
        print("mockcluster: rd_kafka_mock_cluster_new failed", file=sys.stderr)
        return 1
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, args.group_initial_rebalance_delay_ms)
    # The consumer group protocol's heartbeat interval and session (KIP-848), where this
    # librdkafka's mock has the setters.
    for flag, symbol in (("group_consumer_heartbeat_interval_ms", "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms"),
                         ("group_consumer_session_timeout_ms", "rd_kafka_mock_set_group_consumer_session_timeout_ms")):
        value = getattr(args, flag, None)
        setter = getattr(lib, symbol, None)
        if value is not None and setter is not None:
            setter.restype = None
            setter.argtypes = [ctypes.c_void_p, ctypes.c_int]
            setter(mc, int(value))
    if args.api_versions_like_broker:
        # Lower the mock's maxima to the broker's; APIs the broker lacks are withdrawn (-1).
        # A version above the mock's own maximum is never advertised: the mock cannot parse it.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import kproto
        host_, port_ = kproto.split_hostport(lib.rd_kafka_mock_cluster_bootstraps(mc).decode().split(",")[0])
        conn = kproto.Conn(host_, port_, timeout=5)
        mock_versions = conn.api_versions()
        conn.close()
        for key, (lo, hi) in mock_versions.items():
            if key in BROKER_API_VERSIONS:
                blo, bhi = BROKER_API_VERSIONS[key]
                lib.rd_kafka_mock_set_apiversion(mc, key, max(lo, blo), min(hi, bhi))
            else:
                lib.rd_kafka_mock_set_apiversion(mc, key, -1, -1)
    for spec in args.topic:
        name, _, parts = spec.rpartition(":")
        if not name:
            name, parts = spec, str(args.num_partitions or 1)
        err = lib.rd_kafka_mock_topic_create(mc, name.encode(), int(parts), 1)
        if err:
            print("mockcluster: topic %s: %s" % (name, lib.rd_kafka_err2str(err).decode()), file=sys.stderr)
            return 1

    bootstraps = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
    if args.advertise:
        ahost, _, aport = args.advertise.rpartition(":")
        err = lib.rd_kafka_mock_broker_set_host_port(mc, 1, ahost.encode(), int(aport))
        if err:
            print("mockcluster: --advertise: %s" % lib.rd_kafka_err2str(err).decode(), file=sys.stderr)
            return 1
    print("listening on " + bootstraps.split(",")[0], flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    lib.rd_kafka_mock_cluster_destroy(mc)
    lib.rd_kafka_destroy(rk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
