//! A throwaway PostgreSQL server for tests (feature `harness`): a fresh cluster in a
//! temporary directory, reached only through a unix socket in that directory (no TCP port is
//! opened), stopped and removed on drop.
//!
//! The binaries are found through the `PG_BIN` environment variable (a directory holding
//! `initdb` and `postgres`), else the newest `/usr/lib/postgresql/*/bin`, else
//! `pg_config --bindir`. PostgreSQL refuses to run as root: run as root, the harness runs
//! both binaries as the `postgres` user (read from `/etc/passwd`), in a directory under
//! `/tmp` that it creates with mode 0700 and gives to that user; otherwise it runs them as
//! the current user. [`TempPostgres::start`] returns [`HarnessError::NotInstalled`] when
//! there is no PostgreSQL to run, so that a test can skip (or, under CI, fail) with the
//! reason.
//!
//! The server runs with `fsync=off`: it is a test server, and what it must survive is a
//! clean stop and start ([`TempPostgres::stop`], [`TempPostgres::start_again`]), which
//! checkpoints.

use std::fmt;
use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio_postgres::NoTls;

/// How long `initdb` may take.
pub const INITDB_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the server may take to accept connections after it is started.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fast shutdown (SIGINT) may take before the server is killed (SIGKILL).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// The port number: with no TCP listener, it only names the socket file `.s.PGSQL.5432`,
/// which lives in the harness's own directory, so servers never collide.
const PORT: u16 = 5432;
/// The superuser `initdb` creates.
const SUPERUSER: &str = "postgres";

/// Why the harness could not give a server.
#[derive(Debug)]
pub enum HarnessError {
    /// No PostgreSQL to run here (no binaries, or no user to run them as): a test skips,
    /// or fails under CI.
    NotInstalled(String),
    /// PostgreSQL is there but did not start, or a command against it failed.
    Failed(String),
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::NotInstalled(why) => write!(f, "PostgreSQL is not available: {why}"),
            HarnessError::Failed(why) => write!(f, "the test PostgreSQL failed: {why}"),
        }
    }
}

impl std::error::Error for HarnessError {}

/// A running throwaway PostgreSQL server. Stopped (SIGINT, then SIGKILL after
/// [`STOP_TIMEOUT`]) and its directory removed on drop.
#[derive(Debug)]
pub struct TempPostgres {
    bin: PathBuf,
    dir: PathBuf,
    /// `(uid, gid)` to run the binaries as; `None`: as the current user.
    run_as: Option<(u32, u32)>,
    server: Option<Child>,
}

impl TempPostgres {
    /// Finds the binaries, creates a cluster in a new temporary directory, starts the server
    /// and waits (bounded) until it accepts connections.
    pub async fn start() -> Result<Self, HarnessError> {
        let bin = find_bin()?;
        let run_as = if is_root() {
            Some(postgres_user()?)
        } else {
            None
        };
        let dir = make_dir(run_as)?;
        let mut pg = TempPostgres {
            bin,
            dir,
            run_as,
            server: None,
        };
        pg.initdb().await?;
        pg.start_again().await?;
        Ok(pg)
    }

    /// The directory of the server's unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// A `key=value` connection string for database `dbname` as the superuser, over the
    /// unix socket.
    pub fn url(&self, dbname: &str) -> String {
        format!(
            "host={} port={PORT} user={SUPERUSER} dbname={dbname}",
            self.dir.display()
        )
    }

    /// Creates database `name` (letters, digits and `_` only) and returns its connection
    /// string.
    pub async fn create_database(&self, name: &str) -> Result<String, HarnessError> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(HarnessError::Failed(format!(
                "database name `{name}`: use letters, digits and `_` only"
            )));
        }
        self.execute("postgres", &format!("CREATE DATABASE {name}"))
            .await?;
        Ok(self.url(name))
    }

    /// Runs `sql` (one or more statements) in database `dbname` on a connection of its own.
    pub async fn execute(&self, dbname: &str, sql: &str) -> Result<(), HarnessError> {
        let client = self.connect(dbname).await?;
        client
            .batch_execute(sql)
            .await
            .map_err(|e| HarnessError::Failed(format!("`{sql}` in {dbname}: {}", describe(&e))))
    }

    /// A plain connection to database `dbname` (its connection task is spawned), for tests
    /// that look at tables directly.
    pub async fn connect(&self, dbname: &str) -> Result<tokio_postgres::Client, HarnessError> {
        let (client, connection) = tokio_postgres::connect(&self.url(dbname), NoTls)
            .await
            .map_err(|e| HarnessError::Failed(format!("connect to {dbname}: {}", describe(&e))))?;
        tokio::spawn(async move {
            // The connection ends with an error when the server stops: nothing to do.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Whether the server process is running.
    pub fn is_running(&mut self) -> bool {
        match self.server.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the server: a fast shutdown (SIGINT: clients are disconnected, a checkpoint is
    /// written), then SIGKILL if it has not exited within [`STOP_TIMEOUT`]. Blocks the
    /// calling thread until the process has exited. Stopping a stopped server does nothing.
    pub fn stop(&mut self) -> Result<(), HarnessError> {
        let Some(mut child) = self.server.take() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return Ok(());
        }
        // SIGINT through kill(1): the crate forbids `unsafe`, so no libc::kill.
        let sent = Command::new("kill")
            .arg("-INT")
            .arg(child.id().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while sent && Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        child
            .kill()
            .and_then(|()| child.wait().map(drop))
            .map_err(|e| HarnessError::Failed(format!("kill the server: {e}")))
    }

    /// Starts the server (again) on the same cluster and waits, at most [`READY_TIMEOUT`],
    /// until it accepts connections.
    pub async fn start_again(&mut self) -> Result<(), HarnessError> {
        if self.is_running() {
            return Ok(());
        }
        let log = self.dir.join("postgres.log");
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| HarnessError::Failed(format!("open {}: {e}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(|e| HarnessError::Failed(format!("open {}: {e}", log.display())))?;
        let mut cmd = self.command("postgres");
        cmd.arg("-D")
            .arg(self.dir.join("data"))
            .arg("-k")
            .arg(&self.dir)
            .arg("-p")
            .arg(PORT.to_string())
            .args(["-c", "listen_addresses="])
            .args(["-c", "fsync=off"])
            .args(["-c", "shared_buffers=16MB"])
            .args(["-c", "max_connections=100"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = cmd
            .spawn()
            .map_err(|e| HarnessError::Failed(format!("start {}: {e}", self.bin.display())))?;
        self.server = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if !self.is_running() {
                self.server = None;
                return Err(HarnessError::Failed(format!(
                    "the server exited at start; its log:\n{}",
                    self.log_tail()
                )));
            }
            let attempt = tokio::time::timeout(
                Duration::from_secs(5),
                tokio_postgres::connect(&self.url("postgres"), NoTls),
            )
            .await;
            if let Ok(Ok((client, connection))) = attempt {
                drop(client);
                let _ = connection.await;
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = self.stop();
                return Err(HarnessError::Failed(format!(
                    "the server did not accept connections within {READY_TIMEOUT:?}; its \
                     log:\n{}",
                    self.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn initdb(&self) -> Result<(), HarnessError> {
        let log = self.dir.join("initdb.log");
        let out = File::create(&log)
            .map_err(|e| HarnessError::Failed(format!("create {}: {e}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(|e| HarnessError::Failed(format!("create {}: {e}", log.display())))?;
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let mut child = cmd
            .spawn()
            .map_err(|e| HarnessError::Failed(format!("run initdb: {e}")))?;
        let deadline = Instant::now() + INITDB_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    let text = fs::read_to_string(&log).unwrap_or_default();
                    return Err(HarnessError::Failed(format!("initdb {status}:\n{text}")));
                }
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(HarnessError::Failed(format!(
                        "initdb did not finish within {INITDB_TIMEOUT:?}"
                    )));
                }
                Err(e) => return Err(HarnessError::Failed(format!("wait for initdb: {e}"))),
            }
        }
    }

    /// A command for binary `name`, run as the server's user, in the harness's directory.
    fn command(&self, name: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(name));
        cmd.current_dir(&self.dir).env("LC_ALL", "C");
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("{e}");
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The directory of PostgreSQL's binaries, or why there is none.
pub fn find_bin() -> Result<PathBuf, HarnessError> {
    find_bin_from(std::env::var_os("PG_BIN").map(PathBuf::from))
}

/// [`find_bin`] with `PG_BIN`'s value passed in.
fn find_bin_from(pg_bin: Option<PathBuf>) -> Result<PathBuf, HarnessError> {
    let has_binaries = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = pg_bin {
        return if has_binaries(&dir) {
            Ok(dir)
        } else {
            Err(HarnessError::NotInstalled(format!(
                "PG_BIN={} holds no initdb and postgres",
                dir.display()
            )))
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            has_binaries(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_binaries(&dir) {
            return Ok(dir);
        }
    }
    Err(HarnessError::NotInstalled(
        "no initdb and postgres in $PG_BIN, /usr/lib/postgresql/*/bin or `pg_config \
         --bindir` (install PostgreSQL, e.g. `apt-get install -y postgresql`)"
            .to_string(),
    ))
}

/// A client error with the server's message, when the server sent one.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

fn is_root() -> bool {
    // /proc/self belongs to the process's effective user.
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// The `postgres` user's uid and gid, from /etc/passwd.
fn postgres_user() -> Result<(u32, u32), HarnessError> {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                ["postgres", _, uid, gid, ..] => Some((uid.parse().ok()?, gid.parse().ok()?)),
                _ => None,
            }
        })
        .ok_or_else(|| {
            HarnessError::NotInstalled(
                "running as root, and there is no `postgres` user to run the server as \
                 (PostgreSQL refuses to run as root)"
                    .to_string(),
            )
        })
}

/// A new directory under /tmp, mode 0700, owned by the server's user.
fn make_dir(run_as: Option<(u32, u32)>) -> Result<PathBuf, HarnessError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = PathBuf::from(format!(
        "/tmp/store-postgres-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let failed = |e: std::io::Error| HarnessError::Failed(format!("{}: {e}", dir.display()));
    fs::create_dir(&dir).map_err(failed)?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(failed)?;
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(failed)?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pg_bin_without_the_binaries_is_not_installed_and_says_so() {
        let dir = std::env::temp_dir();
        match find_bin_from(Some(dir.clone())) {
            Err(HarnessError::NotInstalled(why)) => {
                assert!(why.contains("PG_BIN="), "{why}");
                assert!(why.contains(&dir.display().to_string()), "{why}");
            }
            other => panic!("expected NotInstalled, got {other:?}"),
        }
    }

    #[test]
    fn not_installed_reads_as_such() {
        let e = HarnessError::NotInstalled("no initdb".into());
        assert_eq!(e.to_string(), "PostgreSQL is not available: no initdb");
    }
}
