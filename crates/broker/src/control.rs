//! The control port (`--control-listen HOST:PORT`): the broker's [`Faults`] and its record of
//! requests from any language, as JSON lines over TCP. One JSON object per line in, one per
//! line out, in order:
//!
//! ```text
//! {"op":"fail","api":"Heartbeat","error":27,"count":2,"client_id":"c1"}  → {"ok":true}
//! {"op":"latency","api":"Fetch","ms":200}                                  → {"ok":true}
//! {"op":"drop","api":"OffsetCommit","count":1}                             → {"ok":true}
//! {"op":"clear"}                                                           → {"ok":true}
//! {"op":"requests","since":0}  → {"ok":true,"requests":[…],"next":N,"missed":M}
//! {"op":"kick","group":"g","member":"m-1"}                                → {"ok":true}
//! {"op":"rebalance","group":"g"}                                           → {"ok":true,"started":true}
//! {"op":"pause","group":"g"}                                               → {"ok":true,"was_running":true}
//! {"op":"resume","group":"g"}                                              → {"ok":true,"was_paused":true}
//! {"op":"delete_records","topic":"t","partition":0,"before":5}             → {"ok":true,"log_start":{"0":5}}
//! {"op":"advance_clock","ms":6000}  → {"ok":true,"now_ms":N,"expired":[{"group":"g","member":"m-1"}],…}
//! {"op":"fail","api":"Nope","error":1} → {"ok":false,"error":"unknown API …","code":"UNKNOWN_API"}
//! ```
//!
//! `api` is Kafka's API name (`Heartbeat`, `OffsetCommit`, any case) or its key (`12`);
//! `count` defaults to 1; `client_id` (optional) limits the rule to one client id; latency
//! `ms` 0 removes a latency. A line longer than [`MAX_LINE`] bytes is answered with an error
//! and the connection is closed; any other bad line is answered with an error and the
//! connection goes on. See the crate's README, "Faults and the control port".

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, Semaphore};
use tracing::{debug, info, warn};

use crate::faults::{parse_api, FaultError, Faults};
use crate::shutdown::Shutdown;

/// The longest line the control port reads (64 KiB).
pub const MAX_LINE: usize = 64 * 1024;

/// The most control connections open at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 64;

/// Answers one line of the protocol (without its newline) with one JSON object (without a
/// newline). Never panics, whatever the line.
pub async fn answer(faults: &Faults, line: &str) -> String {
    match command(faults, line).await {
        Ok(mut fields) => {
            fields.insert("ok".into(), Value::Bool(true));
            Value::Object(fields).to_string()
        }
        Err(Refusal { code, error }) => {
            json!({"ok": false, "error": error, "code": code}).to_string()
        }
    }
}

/// Why a line was refused: a stable code and a message.
struct Refusal {
    code: &'static str,
    error: String,
}

impl From<FaultError> for Refusal {
    fn from(e: FaultError) -> Self {
        Refusal {
            code: e.code(),
            error: e.to_string(),
        }
    }
}

fn bad(error: impl Into<String>) -> Refusal {
    Refusal {
        code: "BAD_REQUEST",
        error: error.into(),
    }
}

async fn command(faults: &Faults, line: &str) -> Result<Map<String, Value>, Refusal> {
    let value: Value = serde_json::from_str(line).map_err(|e| Refusal {
        code: "BAD_JSON",
        error: format!("not a JSON object: {e}"),
    })?;
    let Value::Object(fields) = value else {
        return Err(bad(
            "each line must be one JSON object, such as {\"op\":\"clear\"}",
        ));
    };
    let op = match fields.get("op") {
        Some(Value::String(op)) => op.as_str(),
        Some(_) => return Err(bad("`op` must be a string")),
        None => return Err(bad(format!("missing `op`: {OPS}"))),
    };
    let done = Ok(Map::new());
    match op {
        "fail" => {
            let error = integer(&fields, "error", None)?;
            let error = i16::try_from(error).map_err(|_| {
                bad(format!(
                    "`error` {error} is not a Kafka error code (an i16)"
                ))
            })?;
            faults.fail(
                api(&fields)?,
                error,
                count(&fields)?,
                client_id(&fields)?.as_deref(),
            )?;
            done
        }
        "drop" => {
            faults.drop_connection(
                api(&fields)?,
                count(&fields)?,
                client_id(&fields)?.as_deref(),
            )?;
            done
        }
        "latency" => {
            let ms = integer(&fields, "ms", None)?;
            let ms = u64::try_from(ms).map_err(|_| bad("`ms` must be 0 or more"))?;
            faults.latency(api(&fields)?, ms, client_id(&fields)?.as_deref())?;
            done
        }
        "clear" => {
            faults.clear();
            done
        }
        "kick" => {
            faults
                .kick(&string(&fields, "group")?, &string(&fields, "member")?)
                .await?;
            done
        }
        "rebalance" => {
            let started = faults.rebalance(&string(&fields, "group")?).await?;
            Ok(Map::from_iter([("started".into(), Value::Bool(started))]))
        }
        "pause" => {
            let was_running = faults.pause_coordinator(&string(&fields, "group")?);
            Ok(Map::from_iter([(
                "was_running".into(),
                Value::Bool(was_running),
            )]))
        }
        "resume" => {
            let was_paused = faults.resume_coordinator(&string(&fields, "group")?);
            Ok(Map::from_iter([(
                "was_paused".into(),
                Value::Bool(was_paused),
            )]))
        }
        "delete_records" => {
            let topic = string(&fields, "topic")?;
            let partition = match fields.get("partition") {
                None | Some(Value::Null) => None,
                Some(_) => Some(
                    u32::try_from(integer(&fields, "partition", None)?)
                        .map_err(|_| bad("`partition` must be 0 or more"))?,
                ),
            };
            let before = match fields.get("before") {
                None | Some(Value::Null) => None,
                Some(_) => Some(integer(&fields, "before", None)?),
            };
            let starts = faults.delete_records(&topic, partition, before).await?;
            let starts: Map<String, Value> = starts
                .into_iter()
                .map(|(p, start)| (p.to_string(), Value::from(start)))
                .collect();
            Ok(Map::from_iter([(
                "log_start".into(),
                Value::Object(starts),
            )]))
        }
        "advance_clock" => {
            let ms = integer(&fields, "ms", None)?;
            let ms = u64::try_from(ms).map_err(|_| bad("`ms` must be 0 or more"))?;
            let advanced = faults.advance_clock(ms).await?;
            match serde_json::to_value(advanced) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(Refusal {
                    code: "INTERNAL",
                    error: "the clock's answer could not be written as JSON".into(),
                }),
            }
        }
        "requests" => {
            let since = integer(&fields, "since", Some(0))?;
            let since = u64::try_from(since).map_err(|_| bad("`since` must be 0 or more"))?;
            let seen = faults.requests_since(since);
            match serde_json::to_value(seen) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(Refusal {
                    code: "INTERNAL",
                    error: "the record could not be written as JSON".into(),
                }),
            }
        }
        other => Err(Refusal {
            code: "UNKNOWN_OP",
            error: format!(
                "unknown op `{}`: {OPS}",
                other.chars().take(64).collect::<String>()
            ),
        }),
    }
}

/// The ops, for the messages.
const OPS: &str = "fail, latency, drop, clear, requests, kick, rebalance, pause, resume, \
     delete_records or advance_clock";

fn string(fields: &Map<String, Value>, name: &str) -> Result<String, Refusal> {
    match fields.get(name) {
        Some(Value::String(v)) if !v.is_empty() => Ok(v.clone()),
        Some(_) => Err(bad(format!("`{name}` must be a non-empty string"))),
        None => Err(bad(format!("missing `{name}`"))),
    }
}

fn integer(fields: &Map<String, Value>, name: &str, default: Option<i64>) -> Result<i64, Refusal> {
    match (fields.get(name), default) {
        (Some(v), _) => v
            .as_i64()
            .ok_or_else(|| bad(format!("`{name}` must be an integer"))),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(bad(format!("missing `{name}`"))),
    }
}

fn api(fields: &Map<String, Value>) -> Result<kafka_protocol::messages::ApiKey, Refusal> {
    match fields.get("api") {
        Some(Value::String(name)) => Ok(parse_api(name)?),
        Some(Value::Number(n)) => Ok(parse_api(&n.to_string())?),
        Some(_) => Err(bad("`api` must be a Kafka API name or key")),
        None => Err(bad("missing `api`")),
    }
}

fn count(fields: &Map<String, Value>) -> Result<u32, Refusal> {
    let n = integer(fields, "count", Some(1))?;
    u32::try_from(n).map_err(|_| bad(format!("`count` {n} is outside 1..={}", u32::MAX)))
}

fn client_id(fields: &Map<String, Value>) -> Result<Option<String>, Refusal> {
    match fields.get("client_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => Ok(Some(c.clone())),
        Some(_) => Err(bad("`client_id` must be a string")),
    }
}

/// The control port's listener, bound at start.
#[derive(Debug)]
pub(crate) struct ControlListener {
    listener: TcpListener,
    address: SocketAddr,
}

impl ControlListener {
    pub(crate) async fn bind(address: SocketAddr) -> Result<ControlListener, crate::BrokerError> {
        let bind_failed = |source| crate::BrokerError::Bind { address, source };
        let listener = TcpListener::bind(address).await.map_err(bind_failed)?;
        let address = listener.local_addr().map_err(bind_failed)?;
        info!(%address, "control port (faults and the record of requests; no authentication)");
        Ok(ControlListener { listener, address })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Serves control connections until the shutdown signal.
    pub(crate) async fn serve(self, faults: Arc<Faults>, notify: broadcast::Receiver<()>) {
        let mut shutdown = Shutdown::new(notify.resubscribe());
        let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let accept = async {
            loop {
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    return;
                };
                let (socket, peer) = match self.listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        warn!(error = %e, "control port: accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let faults = faults.clone();
                let mut stop = Shutdown::new(notify.resubscribe());
                tokio::spawn(async move {
                    tokio::select! {
                        reason = connection(socket, &faults) => debug!(%peer, reason, "control connection closed"),
                        () = stop.recv() => {}
                    }
                    drop(permit);
                });
            }
        };
        tokio::select! {
            () = accept => {}
            () = shutdown.recv() => {}
        }
    }
}

/// Serves one control connection; returns why it ended.
async fn connection(socket: TcpStream, faults: &Faults) -> &'static str {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        // One byte more than a line may have: a longer line is seen as such.
        let limit = u64::try_from(MAX_LINE + 1).unwrap_or(u64::MAX);
        let read = match (&mut lines).take(limit).read_until(b'\n', &mut line).await {
            Ok(read) => read,
            Err(_) => return "read failed",
        };
        if read == 0 {
            return "closed by the client";
        }
        let complete = line.last() == Some(&b'\n');
        if !complete && line.len() > MAX_LINE {
            let refusal = json!({
                "ok": false,
                "error": format!("a line longer than {MAX_LINE} bytes; closing the connection"),
                "code": "LINE_TOO_LONG",
            });
            let _ = write.write_all(format!("{refusal}\n").as_bytes()).await;
            return "line too long";
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            if !complete {
                return "closed by the client";
            }
            continue;
        }
        let mut out = answer(faults, text).await;
        out.push('\n');
        if write.write_all(out.as_bytes()).await.is_err() {
            return "write failed";
        }
        if !complete {
            return "closed by the client";
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(faults: &Faults, line: &str) -> Value {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let answer = runtime.block_on(answer(faults, line));
        serde_json::from_str(&answer).expect("one JSON object")
    }

    #[test]
    fn the_protocol_sets_faults_and_refuses_bad_lines() {
        let f = Faults::default();
        let ok = json!({"ok": true});
        assert_eq!(
            parsed(
                &f,
                r#"{"op":"fail","api":"Heartbeat","error":27,"count":2,"client_id":"c1"}"#
            ),
            ok
        );
        assert_eq!(parsed(&f, r#"{"op":"latency","api":1,"ms":200}"#), ok);
        assert_eq!(parsed(&f, r#"{"op":"drop","api":"OffsetCommit"}"#), ok);
        assert_eq!(f.rule_count(), 3);
        assert_eq!(parsed(&f, r#"{"op":"clear"}"#), ok);
        assert_eq!(f.rule_count(), 0);
        let r = parsed(&f, r#"{"op":"requests","since":0}"#);
        assert_eq!(r["ok"], true);
        assert_eq!(r["next"], 0);
        assert!(r["requests"].as_array().is_some_and(Vec::is_empty));

        let code = |line: &str| parsed(&f, line)["code"].as_str().map(str::to_owned);
        for (line, expect) in [
            ("{not json", "BAD_JSON"),
            ("", "BAD_JSON"),
            ("[1,2]", "BAD_REQUEST"),
            (r#"{"api":"Heartbeat"}"#, "BAD_REQUEST"),
            (r#"{"op":"explode"}"#, "UNKNOWN_OP"),
            (r#"{"op":"fail","api":"Heartbeat"}"#, "BAD_REQUEST"),
            (
                r#"{"op":"fail","api":"Heartbeat","error":99999}"#,
                "BAD_REQUEST",
            ),
            (
                r#"{"op":"fail","api":"Heartbeat","error":27,"count":-1}"#,
                "BAD_REQUEST",
            ),
            (
                r#"{"op":"fail","api":"Heartbeat","error":27,"count":0}"#,
                "ZERO_COUNT",
            ),
            (r#"{"op":"fail","api":"Heartbeat","error":0}"#, "NO_ERROR"),
            (r#"{"op":"fail","api":"Nope","error":1}"#, "UNKNOWN_API"),
            (
                r#"{"op":"fail","api":"DescribeGroups","error":1}"#,
                "NO_ERROR_FIELD",
            ),
            (r#"{"op":"latency","api":"Fetch","ms":-5}"#, "BAD_REQUEST"),
            (r#"{"op":"latency","api":"Fetch","ms":1e3}"#, "BAD_REQUEST"),
            (
                r#"{"op":"drop","api":"Fetch","client_id":5}"#,
                "BAD_REQUEST",
            ),
            (r#"{"op":"requests","since":"x"}"#, "BAD_REQUEST"),
        ] {
            assert_eq!(code(line).as_deref(), Some(expect), "{line}");
            assert_eq!(parsed(&f, line)["ok"], false);
        }
        assert_eq!(f.rule_count(), 0, "nothing refused was set");

        for (line, expect) in [
            (r#"{"op":"pause"}"#, "BAD_REQUEST"),
            (r#"{"op":"resume","group":""}"#, "BAD_REQUEST"),
            (r#"{"op":"kick","group":"g"}"#, "BAD_REQUEST"),
            (r#"{"op":"rebalance","group":7}"#, "BAD_REQUEST"),
            // Faults of no broker: no coordinator to kick from.
            (r#"{"op":"kick","group":"g","member":"m"}"#, "GROUP"),
        ] {
            assert_eq!(code(line).as_deref(), Some(expect), "{line}");
        }
        assert_eq!(
            parsed(&f, r#"{"op":"pause","group":"g"}"#),
            json!({"ok": true, "was_running": true})
        );
        assert_eq!(
            parsed(&f, r#"{"op":"pause","group":"g"}"#),
            json!({"ok": true, "was_running": false})
        );
        assert_eq!(f.paused_coordinators(), ["g"]);
        assert_eq!(parsed(&f, r#"{"op":"clear"}"#), ok);
        assert!(f.paused_coordinators().is_empty(), "clear resumes");
        assert_eq!(
            parsed(&f, r#"{"op":"resume","group":"g"}"#),
            json!({"ok": true, "was_paused": false})
        );
    }
}
