"""Processes of the suite: the broker (ours or the mock) and client workers.

Every wait here is bounded. Workers write JSON lines on stdout (see workers/pyclient.py); a
reader thread keeps them in order in Proc.events, and wait_for() blocks on a condition until an
event matches or the deadline passes.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INTEROP = os.path.dirname(HERE)
ROOT = os.path.dirname(INTEROP)


class Timeout(Exception):
    pass


def now():
    return time.monotonic()


class Proc:
    """A child process whose stdout is JSON events and whose stderr goes to a log file."""

    def __init__(self, name, cmd, log_path, env=None, json_events=True):
        self.name = name
        self.cmd = cmd
        self.log_path = log_path
        self.events = []
        self.cond = threading.Condition()
        self.eof = False
        self.lines = []  # non-JSON stdout lines
        self._log = open(log_path, "ab")
        self._log.write(("$ %s\n" % " ".join(cmd)).encode())
        self._log.flush()
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                  env=env, cwd=ROOT, start_new_session=True)
        self.pid = self.p.pid
        self.killed_at = None
        # when its stdout ended (it exited, or was killed), on the events' clock
        self.exited_at = None
        self._json = json_events
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.p.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            ev = None
            if self._json and line.startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    ev = None
            with self.cond:
                if ev is not None:
                    self.events.append(ev)
                else:
                    self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.exited_at = now()
            self.cond.notify_all()

    def wait_for(self, pred, timeout, what="event", start=0):
        """First event (from index `start`) for which pred(ev) holds; Timeout otherwise.
        A fatal error event or the process's end also ends the wait (with Timeout)."""
        deadline = now() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.events):
                    ev = self.events[i]
                    i += 1
                    if pred(ev):
                        return ev
                    if ev.get("ev") == "error" and ev.get("fatal"):
                        raise Timeout("%s: fatal error while waiting for %s: %s" % (self.name, what, ev.get("msg")))
                if self.eof:
                    raise Timeout("%s ended (exit %s) while waiting for %s" % (self.name, self.p.poll(), what))
                left = deadline - now()
                if left <= 0:
                    raise Timeout("%s: no %s within %.0f s" % (self.name, what, timeout))
                self.cond.wait(min(left, 0.5))

    def wait_line(self, pred, timeout, what="line"):
        deadline = now() + timeout
        i = 0
        with self.cond:
            while True:
                while i < len(self.lines):
                    line = self.lines[i]
                    i += 1
                    if pred(line):
                        return line
                if self.eof:
                    raise Timeout("%s ended (exit %s) before printing %s" % (self.name, self.p.poll(), what))
                left = deadline - now()
                if left <= 0:
                    raise Timeout("%s printed no %s within %.0f s" % (self.name, what, timeout))
                self.cond.wait(min(left, 0.5))

    def snapshot(self):
        with self.cond:
            return list(self.events)

    def send(self, line):
        try:
            self.p.stdin.write((line + "\n").encode())
            self.p.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def stop(self, timeout=20):
        """Graceful: the "stop" command, then SIGTERM, then SIGKILL. Returns the exit code,
        once every line the process printed has been read (its last events, "closed"
        among them, can otherwise still be in the pipe when it has exited: seen in CI)."""
        code = None
        if self.p.poll() is None:
            self.send("stop")
            try:
                code = self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                code = self.terminate()
        else:
            code = self.p.returncode
        self.join_reader()
        return code

    def terminate(self, grace=5):
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                return self.p.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        return self.kill()

    def kill(self):
        if self.p.poll() is None:
            self.killed_at = now()
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            return self.p.wait(10)
        except subprocess.TimeoutExpired:
            return None

    def alive(self):
        return self.p.poll() is None

    def join_reader(self, timeout=5):
        self._reader.join(timeout)

    def close_log(self):
        try:
            self._log.close()
        except OSError:
            pass


class Broker:
    """Our broker or the mock cluster: started with the broker's command line, address read
    from its `listening on HOST:PORT` line."""

    def __init__(self, cmd, args, log_path, name="broker", env=None):
        self.cmd = list(cmd)
        self.args = list(args)
        self.log_path = log_path
        self.name = name
        self.env = env
        self.proc = None
        self.address = None

    def start(self, timeout=30):
        self.proc = Proc(self.name, self.cmd + self.args, self.log_path, env=self.env, json_events=False)
        line = self.proc.wait_line(lambda l: l.startswith("listening on "), timeout, "`listening on HOST:PORT`")
        self.address = line.split("listening on ", 1)[1].strip()
        return self.address

    def listener(self, protocol, timeout=10):
        """HOST:PORT of a further listener, from its `listening on PROTOCOL://HOST:PORT` line."""
        prefix = "listening on %s://" % protocol
        line = self.proc.wait_line(lambda l: l.startswith(prefix), timeout, "`%sHOST:PORT`" % prefix)
        return line[len(prefix):].strip()

    def control(self, timeout=10):
        """HOST:PORT of the control port (`--control-listen`), from its `control on HOST:PORT`
        line."""
        line = self.proc.wait_line(lambda l: l.startswith("control on "), timeout, "`control on HOST:PORT`")
        return line.split("control on ", 1)[1].strip()

    def metrics(self, timeout=10):
        """HOST:PORT of the metrics listener (`--metrics-listen`: `/metrics` and the page of
        groups), from its `metrics on HOST:PORT` line."""
        line = self.proc.wait_line(lambda l: l.startswith("metrics on "), timeout, "`metrics on HOST:PORT`")
        return line.split("metrics on ", 1)[1].strip()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL after `timeout` s. Returns (exit code, seconds taken, killed)."""
        if not self.proc:
            return None, 0.0, False
        t0 = now()
        if self.proc.p.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.p.returncode, now() - t0, True
        return self.proc.p.returncode, now() - t0, False

    def rss_kib(self):
        return rss_kib(self.proc.pid)


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def python_exe():
    return sys.executable


def node_exe():
    return os.environ.get("INTEROP_NODE", "node")
