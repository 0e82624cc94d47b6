#!/usr/bin/env python3
"""The broker's control port (`broker --control-listen HOST:PORT`) from Python: faults on
demand and the record of the requests the broker received. Standard library only.

    from control import Control

    with Control("127.0.0.1:9999") as control:
        control.fail("Heartbeat", 27, count=2, client_id="c1")   # REBALANCE_IN_PROGRESS
        control.latency("Fetch", 200)
        control.drop("OffsetCommit", count=1)
        control.kick("my-group", member_id)       # its next heartbeat: UNKNOWN_MEMBER_ID
        control.rebalance("my-group")             # REBALANCE_IN_PROGRESS at the next heartbeat
        control.pause("my-group")                 # COORDINATOR_NOT_AVAILABLE until resume
        control.resume("my-group")
        control.advance_clock(6000)   # with --manual-clock: what is due by then runs now
        seen = control.requests(since=0)   # {"requests": [...], "next": N, "missed": M}
        control.clear()

From a shell, one JSON object per argument, each answer printed on its own line:

    python3 interop/lib/control.py 127.0.0.1:9999 '{"op":"clear"}' '{"op":"requests"}'

The protocol is one JSON object per line each way; see crates/broker/README.md, "Faults and
the control port". librdkafka's mock cluster speaks it too, for the faults it has
(`interop/lib/mockcluster.py --control-listen HOST:PORT`); the others (kick, rebalance,
requests, a client_id) are refused there with the code UNSUPPORTED.
"""
import json
import socket
import sys


class ControlError(Exception):
    """The broker refused a control request: `code` is its stable code (UNKNOWN_API,
    NO_ERROR_FIELD, BAD_REQUEST, ...; UNSUPPORTED from the mock cluster for a fault it
    lacks), the message says why."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _address(address):
    if isinstance(address, tuple):
        return address
    host, _, port = str(address).rpartition(":")
    return (host.strip("[]") or "127.0.0.1", int(port))


class Control:
    """One connection to the control port. Each call sends one line and reads one answer."""

    def __init__(self, address, timeout=10.0):
        self._sock = socket.create_connection(_address(address), timeout=timeout)
        self._file = self._sock.makefile("rwb")

    def close(self):
        try:
            self._file.close()
        finally:
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def raw(self, line):
        """Sends one line as it is and returns the decoded answer (ok or not)."""
        self._file.write(line.encode("utf-8") + b"\n")
        self._file.flush()
        answer = self._file.readline()
        if not answer:
            raise ConnectionError("the control port closed the connection")
        return json.loads(answer)

    def call(self, **request):
        """Sends `request` as one JSON object; returns the answer, or raises ControlError."""
        answer = self.raw(json.dumps({k: v for k, v in request.items() if v is not None}))
        if not answer.get("ok"):
            raise ControlError(answer.get("code", "?"), answer.get("error", ""))
        return answer

    def fail(self, api, error, count=1, client_id=None):
        """The next `count` requests of `api` (a Kafka API name or key), from `client_id`
        only if given, are answered with Kafka error code `error`, unhandled."""
        return self.call(op="fail", api=api, error=error, count=count, client_id=client_id)

    def latency(self, api, ms, client_id=None):
        """Every request of `api` waits `ms` before it is handled, until cleared (0 removes)."""
        return self.call(op="latency", api=api, ms=ms, client_id=client_id)

    def drop(self, api, count=1, client_id=None):
        """The connection of each of the next `count` requests of `api` is closed instead of
        answering."""
        return self.call(op="drop", api=api, count=count, client_id=client_id)

    def clear(self):
        """Removes every fault."""
        return self.call(op="clear")

    def kick(self, group, member):
        """Removes `member` from `group` as an admin's removal does: its next heartbeat is
        UNKNOWN_MEMBER_ID (a classic group rebalances; a KIP-848 member is fenced)."""
        return self.call(op="kick", group=group, member=member)

    def rebalance(self, group):
        """Starts a rebalance of `group` (a KIP-848 group: bumps its epoch); returns
        whether one started."""
        return self.call(op="rebalance", group=group)["started"]

    def pause(self, group):
        """Pauses `group`'s coordinator: its requests get COORDINATOR_NOT_AVAILABLE."""
        return self.call(op="pause", group=group)["was_running"]

    def resume(self, group):
        """Resumes `group`'s coordinator."""
        return self.call(op="resume", group=group)["was_paused"]

    def delete_records(self, topic, partition=None, before=None):
        """Deletes `topic`'s records below `before` (all when None), in `partition` or in
        every partition, as Kafka's DeleteRecords: {partition: new log start}."""
        fields = {"op": "delete_records", "topic": topic}
        if partition is not None:
            fields["partition"] = partition
        if before is not None:
            fields["before"] = before
        return {int(p): start for p, start in self.call(**fields)["log_start"].items()}

    def advance_clock(self, ms):
        """Moves the broker's timer clock `ms` forward (the broker runs with --manual-clock)
        and returns once every timer due has run: {"now_ms": N, "expired": [{"group", "member"}],
        "transactions_aborted": [...], "transactional_ids_expired": [...]}."""
        return self.call(op="advance_clock", ms=ms)

    def requests(self, since=0):
        """The recorded requests with seq >= since: {"requests": [...], "next": N,
        "missed": M}; each request has seq, connection, api, api_key, version, client_id,
        group_id, outcome and error_code."""
        answer = self.call(op="requests", since=since)
        answer.pop("ok", None)
        return answer


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with Control(argv[1]) as control:
        ok = True
        for line in argv[2:]:
            answer = control.raw(line)
            ok = ok and bool(answer.get("ok"))
            print(json.dumps(answer))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
