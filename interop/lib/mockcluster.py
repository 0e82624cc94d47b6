#!/usr/bin/env python3
"""librdkafka's mock cluster as a stand-alone process, with the broker's command line.

    mockcluster.py --listen 127.0.0.1:0 [--topic NAME:PARTITIONS]... [--num-partitions N]
                   [--group-initial-rebalance-delay-ms N] [--brokers N] [--api-versions-like-broker]
                   [--control-listen HOST:PORT]

It loads the librdkafka shared object bundled in the confluent-kafka wheel, creates a mock
cluster through ctypes, prints `listening on HOST:PORT` on stdout (one line, flushed) and
stays up until SIGTERM/SIGINT, then exits 0. Options of the real broker that the mock has no
counterpart for (--data-dir, --group-*-session-timeout-ms, --max-frame-bytes, ...) are accepted
and ignored, with a note on stderr, so the suite can start either with the same arguments.

The mock listens on an ephemeral loopback port of its own choosing: --listen is accepted for
symmetry, its port must be 0.

--control-listen HOST:PORT serves the broker's control port protocol (JSON lines; see
crates/broker/README.md, "Faults and the control port") for the faults the mock has, and prints
`control on HOST:PORT` after the `listening on` line, as the broker does:

  fail     rd_kafka_mock_push_request_errors_array: the next `count` requests of the API, from
           every client (a `client_id` is refused: the mock's errors are the cluster's)
  drop     the same with RD_KAFKA_RESP_ERR__TRANSPORT, which makes the mock close the connection
  latency  rd_kafka_mock_broker_set_rtt on every broker: the mock's RTT holds the answer of
           *every* API, after the request was handled (the longest latency set applies)
  pause    COORDINATOR_NOT_AVAILABLE pushed (100,000 deep) for every group API (FindCoordinator,
           JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
           ConsumerGroupHeartbeat) of every group; `resume` clears those APIs' errors (the
           mock cannot pause one group, nor keep a `fail` of those APIs across a resume)
  delete_records  rd_kafka_mock_partition_delete_records (librdkafka 2.16 and later)
  clear    every pushed error and the RTT go

kick, rebalance, requests and advance_clock have no counterpart in the mock: they are answered
{"ok":false,"code":"UNSUPPORTED","error":...} (the broker's refusal shape).
"""
import argparse
import ctypes
import glob
import json
import os
import signal
import socket
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
    76: (1, 1),   # ShareGroupHeartbeat
    77: (1, 1),   # ShareGroupDescribe
    78: (1, 1),   # ShareFetch
    79: (1, 1),   # ShareAcknowledge
}


# Kafka's API names (ApiKey's), for the control port's `api` field
API_KEYS = {
    "Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8, "OffsetFetch": 9,
    "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12, "LeaveGroup": 13, "SyncGroup": 14,
    "DescribeGroups": 15, "ListGroups": 16, "SaslHandshake": 17, "ApiVersions": 18, "CreateTopics": 19,
    "DeleteTopics": 20, "DeleteRecords": 21, "InitProducerId": 22, "OffsetForLeaderEpoch": 23,
    "AddPartitionsToTxn": 24, "AddOffsetsToTxn": 25, "EndTxn": 26, "TxnOffsetCommit": 28,
    "DescribeAcls": 29, "CreateAcls": 30, "DeleteAcls": 31, "DescribeConfigs": 32, "AlterConfigs": 33,
    "CreatePartitions": 37, "SaslAuthenticate": 36, "DeleteGroups": 42, "IncrementalAlterConfigs": 44,
    "OffsetDelete": 47, "DescribeCluster": 60, "DescribeProducers": 61, "DescribeTransactions": 65,
    "ListTransactions": 66, "ConsumerGroupHeartbeat": 68, "ConsumerGroupDescribe": 69,
    "GetTelemetrySubscriptions": 71, "PushTelemetry": 72,
}
# what a paused coordinator answers COORDINATOR_NOT_AVAILABLE to (the broker's list)
GROUP_APIS = (10, 11, 14, 12, 13, 8, 9, 68)
COORDINATOR_NOT_AVAILABLE = 15
RD_KAFKA_RESP_ERR__TRANSPORT = -195
PAUSE_DEPTH = 100_000


class Refused(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class MockControl:
    """The control port's protocol over the mock's own fault setters (see the module's doc)."""

    def __init__(self, lib, mc, topics, bootstrap):
        self.lib, self.mc, self.topics, self.bootstrap = lib, mc, topics, bootstrap
        self.lock = threading.Lock()
        self.latency = {}       # api key -> ms (the mock's RTT is one per broker: the longest)
        self.pushed = set()     # API keys with errors pushed (cleared by `clear`)
        self.paused = set()     # groups "paused" (the mock pauses every group's APIs at once)
        lib.rd_kafka_mock_push_request_errors_array.restype = None
        lib.rd_kafka_mock_push_request_errors_array.argtypes = [ctypes.c_void_p, ctypes.c_int16, ctypes.c_size_t,
                                                                ctypes.POINTER(ctypes.c_int)]
        lib.rd_kafka_mock_clear_request_errors.restype = None
        lib.rd_kafka_mock_clear_request_errors.argtypes = [ctypes.c_void_p, ctypes.c_int16]
        lib.rd_kafka_mock_broker_set_rtt.restype = ctypes.c_int
        lib.rd_kafka_mock_broker_set_rtt.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int]
        self.delete_records_fn = getattr(lib, "rd_kafka_mock_partition_delete_records", None)
        if self.delete_records_fn is not None:
            self.delete_records_fn.restype = ctypes.c_int
            self.delete_records_fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64]

    # ---- fields
    @staticmethod
    def api_key(req):
        api = req.get("api")
        if isinstance(api, bool) or api is None:
            raise Refused("BAD_REQUEST", "`api` is missing: give a Kafka API name or key")
        if isinstance(api, int):
            if api in API_KEYS.values():
                return api
        elif isinstance(api, str):
            if api.strip().isdigit() and int(api) in API_KEYS.values():
                return int(api)
            for name, key in API_KEYS.items():
                if name.lower() == api.strip().lower():
                    return key
        raise Refused("UNKNOWN_API", "unknown API `%s`: give a Kafka API name (OffsetCommit) or key (8)" % api)

    @staticmethod
    def number(req, field, default=None, lo=None):
        value = req.get(field, default)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            raise Refused("BAD_REQUEST", "`%s` must be an integer" % field)
        if lo is not None and value < lo:
            raise Refused("BAD_REQUEST", "`%s` must be at least %d" % (field, lo))
        return value

    @staticmethod
    def every_client(req, op):
        if req.get("client_id") is not None:
            raise Refused("UNSUPPORTED", "the mock's %s applies to every client: it has no per-client rule "
                                         "(rd_kafka_mock_push_request_errors is the cluster's)" % op)

    def push(self, key, errors):
        arr = (ctypes.c_int * len(errors))(*errors)
        self.lib.rd_kafka_mock_push_request_errors_array(self.mc, key, len(errors), arr)
        self.pushed.add(key)

    def set_rtt(self):
        self.lib.rd_kafka_mock_broker_set_rtt(self.mc, -1, max(self.latency.values(), default=0))

    # ---- ops
    def handle(self, req):
        if not isinstance(req, dict):
            raise Refused("BAD_REQUEST", "a request is a JSON object")
        op = req.get("op")
        with self.lock:
            if op == "fail":
                key = self.api_key(req)
                error = self.number(req, "error")
                count = self.number(req, "count", 1, lo=0)
                self.every_client(req, "fail")
                if error == 0:
                    raise Refused("NO_ERROR", "error 0 is no error")
                if count == 0:
                    raise Refused("ZERO_COUNT", "`count` 0 fails nothing")
                self.push(key, [error] * count)
                return {"ok": True}
            if op == "drop":
                key = self.api_key(req)
                count = self.number(req, "count", 1, lo=0)
                self.every_client(req, "drop")
                if count == 0:
                    raise Refused("ZERO_COUNT", "`count` 0 drops nothing")
                self.push(key, [RD_KAFKA_RESP_ERR__TRANSPORT] * count)
                return {"ok": True}
            if op == "latency":
                key = self.api_key(req)
                ms = self.number(req, "ms", lo=0)
                self.every_client(req, "latency")
                if ms > 600_000:
                    raise Refused("LATENCY_TOO_LONG", "at most 600000 ms")
                if ms:
                    self.latency[key] = ms
                else:
                    self.latency.pop(key, None)
                self.set_rtt()
                return {"ok": True, "scope": "every API of every broker: the mock's RTT (rd_kafka_mock_broker_set_rtt) "
                                             "holds each answer after the request was handled"}
            if op == "clear":
                for key in sorted(self.pushed):
                    self.lib.rd_kafka_mock_clear_request_errors(self.mc, key)
                self.pushed.clear()
                self.paused.clear()
                self.latency.clear()
                self.set_rtt()
                return {"ok": True}
            if op == "pause":
                group = req.get("group")
                if not isinstance(group, str):
                    raise Refused("BAD_REQUEST", "`group` must be a string")
                was_running = group not in self.paused
                if not self.paused:
                    for key in GROUP_APIS:
                        self.push(key, [COORDINATOR_NOT_AVAILABLE] * PAUSE_DEPTH)
                self.paused.add(group)
                return {"ok": True, "was_running": was_running,
                        "scope": "every group: the mock's errors are the cluster's, per API"}
            if op == "resume":
                group = req.get("group")
                if not isinstance(group, str):
                    raise Refused("BAD_REQUEST", "`group` must be a string")
                was_paused = group in self.paused
                self.paused.discard(group)
                if was_paused and not self.paused:
                    for key in GROUP_APIS:
                        self.lib.rd_kafka_mock_clear_request_errors(self.mc, key)
                return {"ok": True, "was_paused": was_paused}
            if op == "delete_records":
                return self.delete_records(req)
            if op in ("kick", "rebalance", "requests", "advance_clock"):
                raise Refused("UNSUPPORTED", {
                    "kick": "the mock cannot remove a member from its group (no admin removal, no "
                            "per-member error)",
                    "rebalance": "the mock cannot start a rebalance of a group on demand",
                    "requests": "the mock keeps no record of requests with their client id, group and "
                                "error code (rd_kafka_mock_get_requests has the API key and time only)",
                    "advance_clock": "the mock's timers follow the OS clock: it has no manual clock",
                }[op])
            raise Refused("UNKNOWN_OP", "unknown op `%s`" % op)

    def delete_records(self, req):
        if self.delete_records_fn is None:
            raise Refused("UNSUPPORTED", "this librdkafka's mock has no rd_kafka_mock_partition_delete_records")
        topic = req.get("topic")
        if not isinstance(topic, str) or topic not in self.topics:
            raise Refused("UNKNOWN_PARTITION", "no topic `%s` in the mock (its topics come from --topic)" % topic)
        if req.get("partition") is not None:
            parts = [self.number(req, "partition", lo=0)]
            if parts[0] >= self.topics[topic]:
                raise Refused("UNKNOWN_PARTITION", "%s has %d partitions" % (topic, self.topics[topic]))
        else:
            parts = list(range(self.topics[topic]))
        out = {}
        for p in parts:
            before = req.get("before")
            if before is None:
                before = self.high_watermark(topic, p)
            else:
                before = self.number(req, "before", lo=0)
            err = self.delete_records_fn(self.mc, topic.encode(), p, before)
            if err:
                raise Refused("RECORDS", "partition %d: %s" % (p, self.lib.rd_kafka_err2str(err).decode()))
            out[str(p)] = before
        return {"ok": True, "log_start": out}

    def high_watermark(self, topic, partition):
        import confluent_kafka
        c = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "mockcluster-control"})
        try:
            return c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition), timeout=10)[1]
        finally:
            c.close()

    def serve(self, sock):
        while True:
            conn, _ = sock.accept()
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()

    def connection(self, conn):
        with conn:
            f = conn.makefile("rwb")
            for line in f:
                if len(line) > 65536:
                    answer = {"ok": False, "code": "LINE_TOO_LONG", "error": "a line over 64 KiB"}
                else:
                    try:
                        answer = self.handle(json.loads(line))
                    except ValueError as e:
                        answer = {"ok": False, "code": "BAD_JSON", "error": "not JSON: %s" % e}
                    except Refused as e:
                        answer = {"ok": False, "code": e.code, "error": str(e)}
                f.write((json.dumps(answer) + "\n").encode())
                f.flush()
                if answer.get("code") == "LINE_TOO_LONG":
                    return


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
    # share groups (KIP-932): the record lock and the delivery count limit, set on the mock's
    # share groups (rd_kafka_mock_sharegroup_set_*); the minimum lock has no counterpart
    ap.add_argument("--group-share-record-lock-duration-ms", type=int, default=None)
    ap.add_argument("--group-share-delivery-count-limit", type=int, default=None)
    ap.add_argument("--group-share-min-record-lock-duration-ms")
    ap.add_argument("--auto-create-topics", action="store_true")
    ap.add_argument("--control-listen", help="serve the broker's control port protocol on HOST:PORT (loopback "
                                             "only) for the faults the mock has; see the module's doc")
    args = ap.parse_args()

    host, _, port = args.listen.rpartition(":")
    if port not in ("0", ""):
        print("mockcluster: the mock picks its own port; --listen must end in :0", file=sys.stderr)
        return 2
    ignored = [f for f in ("data_dir", "group_min_session_timeout_ms", "group_max_session_timeout_ms",
                           "group_max_size", "max_frame_bytes", "max_connections",
                           "group_share_min_record_lock_duration_ms") if getattr(args, f)]
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
    for flag, symbol in (("group_share_record_lock_duration_ms", "rd_kafka_mock_sharegroup_set_record_lock_duration"),
                         ("group_share_delivery_count_limit", "rd_kafka_mock_sharegroup_set_max_delivery_attempts")):
        value = getattr(args, flag)
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
    if args.control_listen:
        chost, _, cport = args.control_listen.rpartition(":")
        chost = chost.strip("[]") or "127.0.0.1"
        if chost not in ("127.0.0.1", "::1", "localhost"):
            print("mockcluster: --control-listen must be a loopback address (it has no authentication)",
                  file=sys.stderr)
            return 2
        topics = {}
        for spec in args.topic:
            name, _, parts = spec.rpartition(":")
            if not name:
                name, parts = spec, str(args.num_partitions or 1)
            topics[name] = int(parts)
        control = MockControl(lib, mc, topics, bootstraps)
        csock = socket.create_server((chost, int(cport)))
        threading.Thread(target=control.serve, args=(csock,), daemon=True).start()
        print("control on %s:%d" % csock.getsockname()[:2], flush=True)

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
