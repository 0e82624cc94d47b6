"""A few Kafka requests encoded by hand, for raw-socket checks and the benchmark.

Only what the suite needs: ApiVersions v0, FindCoordinator v0, OffsetCommit v2 (a "simple"
commit: generation -1, empty member id, which Kafka accepts for a group with no members; or a
member's), OffsetFetch v1, CreateTopics v2, and the classic group protocol as the clients speak it to the broker
(JoinGroup v5, SyncGroup v3, Heartbeat v1) with the consumer protocol's assignment v0. Every
socket operation has a timeout; a JoinGroup can be sent and its answer read later (it waits
for the group's barrier).
"""
import socket
import struct

API_VERSIONS, FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 18, 10, 8, 9
JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14
CREATE_TOPICS = 19

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 22: "InitProducerId", 32: "DescribeConfigs", 36: "SaslAuthenticate",
    42: "DeleteGroups", 47: "OffsetDelete", 60: "DescribeCluster", 68: "ConsumerGroupHeartbeat",
}


def _str(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError("short response")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()


class Conn:
    """One connection; requests are sent and answered one at a time."""

    def __init__(self, host, port, timeout=10.0, client_id="interop-raw"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.corr = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_raw(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        chunks, got = [], 0
        while got < n:
            c = self.sock.recv(min(n - got, 1 << 20))
            if not c:
                raise ConnectionError("connection closed by peer")
            chunks.append(c)
            got += len(c)
        return b"".join(chunks)

    def request(self, api_key, api_version, body):
        self.send(api_key, api_version, body)
        return self.receive()

    def send(self, api_key, api_version, body):
        """Sends one request; its answer is read by receive() (one request in flight)."""
        self.corr += 1
        header = struct.pack(">hhi", api_key, api_version, self.corr) + _str(self.client_id)
        msg = header + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)

    def receive(self, timeout=None):
        """The answer to the last request sent, as a Reader positioned after the correlation id;
        socket.timeout if none arrives within `timeout` (default: the connection's)."""
        before = self.sock.gettimeout()
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            size = struct.unpack(">i", self.recv_exact(4))[0]
        finally:
            self.sock.settimeout(before)
        resp = self.recv_exact(size)
        corr = struct.unpack(">i", resp[:4])[0]
        if corr != self.corr:
            raise ValueError("correlation id %d, expected %d" % (corr, self.corr))
        return Reader(resp[4:])

    def api_versions(self):
        """ApiVersions v0: {api_key: (min, max)}; raises on a non-zero error code."""
        r = self.request(API_VERSIONS, 0, b"")
        err = r.i16()
        if err:
            raise ValueError("ApiVersions error %d" % err)
        out = {}
        for _ in range(r.i32()):
            k, lo, hi = r.i16(), r.i16(), r.i16()
            out[k] = (lo, hi)
        return out

    def find_coordinator(self, group):
        r = self.request(FIND_COORDINATOR, 0, _str(group))
        err, node, host, port = r.i16(), r.i32(), r.string(), r.i32()
        return err, node, host, port

    def offset_commit(self, group, offsets, generation=-1, member=""):
        """OffsetCommit v2; offsets: {(topic, partition): offset}. Returns {(t, p): error}."""
        by_topic = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append((p, o))
        body = _str(group) + struct.pack(">i", generation) + _str(member) + struct.pack(">q", -1)
        body += struct.pack(">i", len(by_topic))
        for t, ps in by_topic.items():
            body += _str(t) + struct.pack(">i", len(ps))
            for p, o in ps:
                body += struct.pack(">iq", p, o) + _str("")
        r = self.request(OFFSET_COMMIT, 2, body)
        out = {}
        for _ in range(r.i32()):
            t = r.string()
            for _ in range(r.i32()):
                p, err = r.i32(), r.i16()
                out[(t, p)] = err
        return out

    def create_topics(self, topics, timeout_ms=10000):
        """CreateTopics v2; topics: {name: partitions}, replication factor 1, no configs.
        Returns {name: (error code, error message)}."""
        body = struct.pack(">i", len(topics))
        for name, n in topics.items():
            body += _str(name) + struct.pack(">ihii", n, 1, 0, 0)
        body += struct.pack(">ib", timeout_ms, 0)
        r = self.request(CREATE_TOPICS, 2, body)
        r.i32()  # throttle time
        out = {}
        for _ in range(r.i32()):
            name, err, msg = r.string(), r.i16(), r.string()
            out[name] = (err, msg)
        return out

    def offset_fetch(self, group, partitions):
        """OffsetFetch v1; partitions: [(topic, partition)]. Returns {(t, p): (offset, error)}."""
        by_topic = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body = _str(group) + struct.pack(">i", len(by_topic))
        for t, ps in by_topic.items():
            body += _str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
        r = self.request(OFFSET_FETCH, 1, body)
        out = {}
        for _ in range(r.i32()):
            t = r.string()
            for _ in range(r.i32()):
                p, o, _meta, err = r.i32(), r.i64(), r.string(), r.i16()
                out[(t, p)] = (o, err)
        return out


    # ---- the classic group protocol, at the versions the clients use against the broker

    def send_join(self, group, member="", session_ms=6000, rebalance_ms=None, topics=("t",),
                  protocol="range", instance=None):
        """Sends JoinGroup v5 (protocol type "consumer", one protocol whose metadata is a
        consumer-protocol subscription v0 of `topics`); read the answer with join_result()."""
        meta = struct.pack(">h", 0) + struct.pack(">i", len(topics)) + b"".join(_str(t) for t in topics)
        meta += struct.pack(">i", -1)
        body = _str(group) + struct.pack(">ii", session_ms, rebalance_ms or session_ms) + _str(member)
        body += _str(instance) + _str("consumer") + struct.pack(">i", 1) + _str(protocol)
        body += struct.pack(">i", len(meta)) + meta
        self.send(JOIN_GROUP, 5, body)

    def join_result(self, timeout=None):
        """The JoinGroup v5 answer: dict(error, generation, protocol, leader, member, members)."""
        r = self.receive(timeout)
        r.i32()  # throttle
        out = {"error": r.i16(), "generation": r.i32(), "protocol": r.string(), "leader": r.string(),
               "member": r.string(), "members": []}
        for _ in range(r.i32()):
            mid, _instance, n = r.string(), r.string(), r.i32()
            r.take(max(n, 0))
            out["members"].append(mid)
        return out

    def join(self, group, member="", **kw):
        self.send_join(group, member, **kw)
        return self.join_result()

    def sync(self, group, generation, member, assignments=None):
        """SyncGroup v3; assignments {member: [(topic, partition)]} (the leader's), encoded as
        consumer-protocol assignments v0. Returns (error, [(topic, partition)] assigned)."""
        assignments = assignments or {}
        body = _str(group) + struct.pack(">i", generation) + _str(member) + _str(None)
        body += struct.pack(">i", len(assignments))
        for mid, tps in assignments.items():
            a = encode_assignment(tps)
            body += _str(mid) + struct.pack(">i", len(a)) + a
        r = self.request(SYNC_GROUP, 3, body)
        r.i32()  # throttle
        err, n = r.i16(), r.i32()
        return err, decode_assignment(r.take(n)) if n > 0 else []

    def heartbeat(self, group, generation, member):
        """Heartbeat v1: the error code."""
        r = self.request(HEARTBEAT, 1, _str(group) + struct.pack(">i", generation) + _str(member))
        r.i32()  # throttle
        return r.i16()


def encode_assignment(tps):
    """Consumer-protocol assignment v0: version, [topic, [partition]], user data (null)."""
    by_topic = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    out = struct.pack(">h", 0) + struct.pack(">i", len(by_topic))
    for t, ps in sorted(by_topic.items()):
        out += _str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in sorted(ps))
    return out + struct.pack(">i", -1)


def decode_assignment(data):
    r = Reader(data)
    r.i16()
    out = []
    for _ in range(r.i32()):
        t = r.string()
        out += [(t, r.i32()) for _ in range(r.i32())]
    return sorted(out)


def split_hostport(addr):
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)
