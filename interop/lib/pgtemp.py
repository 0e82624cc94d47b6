"""A throwaway PostgreSQL server for the scenarios that run the broker with --postgres: a fresh
cluster (initdb) in a directory of its own, reached only through a unix socket there (no TCP
port), stopped and removed by stop(). Run as root (these machines), the server runs as the
`postgres` user, which PostgreSQL requires. The binaries: $PG_BIN, else the newest
/usr/lib/postgresql/*/bin. Every wait is bounded."""
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time


class PgUnavailable(Exception):
    """No PostgreSQL to run here."""


def find_bin():
    given = os.environ.get("PG_BIN")
    if given:
        return given
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                   key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    if not found:
        raise PgUnavailable("no /usr/lib/postgresql/*/bin and no PG_BIN (install Debian's postgresql)")
    return found[-1]


class TempPostgres:
    def __init__(self, log_path, timeout=60, durable=False):
        """`durable`: PostgreSQL's own defaults (fsync on, synchronous_commit on), for
        measurements; otherwise fsync=off, for tests."""
        self.durable = durable
        self.bin = find_bin()
        self.dir = tempfile.mkdtemp(prefix="interop-pg-", dir="/tmp")
        os.chmod(self.dir, 0o700)
        self.data = os.path.join(self.dir, "data")
        self.log_path = log_path
        self.proc = None
        self.demote = None
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PgUnavailable("running as root and there is no `postgres` user to run PostgreSQL as")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

            def demote(uid=pw.pw_uid, gid=pw.pw_gid):
                os.setgid(gid)
                os.setuid(uid)
            self.demote = demote
        with open(log_path, "ab") as log:
            r = subprocess.run([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres",
                                "--auth=trust", "-E", "UTF8", "--no-sync"],
                               stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.demote, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("initdb failed (exit %d): see %s" % (r.returncode, log_path))
        self.start(timeout)

    def start(self, timeout=60):
        log = open(self.log_path, "ab")
        settings = ["-c", "listen_addresses=", "-c", "max_connections=200"]
        if not self.durable:
            settings += ["-c", "fsync=off"]
        self.proc = subprocess.Popen([os.path.join(self.bin, "postgres"), "-D", self.data, "-k", self.dir] + settings,
                                     stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.demote)
        log.close()
        deadline = time.time() + timeout
        while not os.path.exists(os.path.join(self.dir, ".s.PGSQL.5432")) or not self._ready():
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited (%d): see %s" % (self.proc.returncode, self.log_path))
            if time.time() > deadline:
                raise RuntimeError("postgres did not accept connections within %ds" % timeout)
            time.sleep(0.1)

    def _ready(self):
        r = subprocess.run([os.path.join(self.bin, "pg_isready"), "-h", self.dir, "-q"],
                           preexec_fn=self.demote, timeout=10)
        return r.returncode == 0

    def create_database(self, name, timeout=30):
        with open(self.log_path, "ab") as log:
            r = subprocess.run([os.path.join(self.bin, "createdb"), "-h", self.dir, "-U", "postgres", name],
                               stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.demote, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("createdb %s failed: see %s" % (name, self.log_path))
        return "postgres://postgres@/%s?host=%s" % (name, self.dir)

    def stop(self, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(2)   # SIGINT: fast shutdown
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
