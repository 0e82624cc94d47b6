//! Authentication of a connection on a SASL_PLAINTEXT or SASL_SSL listener, with Kafka's rules
//! (`SaslServerAuthenticator`): until a connection has authenticated, only ApiVersions,
//! SaslHandshake and SaslAuthenticate are answered; a failed authentication answers
//! SASL_AUTHENTICATION_FAILED and the connection is closed after
//! `connection.failed.authentication.delay.ms`. The authenticated principal (`User:name`)
//! stays on the connection. On an SSL listener the principal is the client certificate's
//! subject (`User:CN=…`), or `User:ANONYMOUS` without one; on SASL_SSL, SASL's wins (Kafka's
//! `DefaultKafkaPrincipalBuilder`).

mod plain;
mod scram;
pub(crate) mod users;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use kafka_protocol::messages::ApiKey;
use tracing::{info, warn};

pub(crate) use scram::{ScramCredential, ScramHash};
pub(crate) use users::{Change, Users};

use crate::config::SaslMechanism;
use crate::context::Endpoint;

/// Kafka's error codes of authentication (kept here, not in `api::codes`, with the one
/// module that sends them).
pub(crate) mod codes {
    pub(crate) use crate::api::codes::NONE;
    pub(crate) const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    pub(crate) const ILLEGAL_SASL_STATE: i16 = 34;
    pub(crate) const SASL_AUTHENTICATION_FAILED: i16 = 58;
}

/// What a SASL listener's connections authenticate against: the enabled mechanisms and the
/// users. Shared by every connection.
#[derive(Debug)]
pub(crate) struct Authenticator {
    pub(crate) mechanisms: Vec<SaslMechanism>,
    pub(crate) users: Arc<Users>,
}

/// Whether `key` is answered before a connection has authenticated (Kafka's rule).
pub(crate) fn allowed_before_authentication(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    )
}

/// A connection's authentication: none on a PLAINTEXT listener, else the SASL state; and the
/// listener it came in on.
#[derive(Debug)]
pub(crate) struct Session {
    authenticator: Option<Arc<Authenticator>>,
    peer: SocketAddr,
    endpoint: Arc<Endpoint>,
    state: Mutex<State>,
    /// The connection's fetch session (KIP-227), if the client opened one.
    fetch: crate::api::fetch_session::FetchSessions,
    /// This connection's number among the broker's (share sessions name the connection that
    /// opened them).
    id: u64,
    /// The share sessions (group, member) opened on this connection: closed with it, as
    /// Kafka's share session cache closes them (KIP-932), at most
    /// [`MAX_SHARE_SESSIONS`](crate::share::MAX_SHARE_SESSIONS).
    share_sessions: Mutex<std::collections::BTreeSet<(String, String)>>,
}

/// The connections' numbers (see [`Session::id`]).
static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[derive(Debug)]
enum State {
    /// Waiting for SaslHandshake (ApiVersions may come first).
    Handshake,
    /// A mechanism was chosen; the exchange is under way. `raw`: after a v0 handshake the
    /// tokens come as bare frames, not SaslAuthenticate requests.
    Authenticating { exchange: Exchange, raw: bool },
    /// Authenticated as this principal (`User:name`), or PLAINTEXT's `User:ANONYMOUS`.
    Authenticated(String),
    /// The authentication failed: the connection is closed after the delay.
    Failed,
}

#[derive(Debug)]
enum Exchange {
    Plain,
    Scram(ScramHash, scram::ScramServer),
}

/// A SaslAuthenticate answer's error: the code and the message the client is told.
pub(crate) type Refusal = (i16, String);

impl Session {
    /// The session of a new connection from `peer` on `endpoint`; `authenticator` is `None`
    /// on a listener without SASL: the connection is authenticated at once, as the client
    /// certificate's `principal` (SSL with `--ssl-client-ca`) or `User:ANONYMOUS`, as in Kafka.
    pub(crate) fn new(
        authenticator: Option<Arc<Authenticator>>,
        peer: SocketAddr,
        endpoint: Arc<Endpoint>,
        principal: Option<String>,
    ) -> Session {
        let state = match authenticator {
            None => State::Authenticated(principal.unwrap_or_else(|| "User:ANONYMOUS".into())),
            Some(_) => State::Handshake,
        };
        Session {
            authenticator,
            peer,
            endpoint,
            state: Mutex::new(state),
            fetch: Default::default(),
            id: NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            share_sessions: Mutex::default(),
        }
    }

    /// This connection's number among the broker's.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Notes that `member` of `group` opened its share session on this connection.
    pub(crate) fn opened_share_session(&self, group: &str, member: &str) {
        let mut sessions = self
            .share_sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sessions.len() < crate::share::MAX_SHARE_SESSIONS {
            sessions.insert((group.to_string(), member.to_string()));
        }
    }

    /// The share sessions opened on this connection, taken (it is closing).
    pub(crate) fn take_share_sessions(&self) -> Vec<(String, String)> {
        std::mem::take(
            &mut *self
                .share_sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_iter()
        .collect()
    }

    /// The connection's fetch session (KIP-227).
    pub(crate) fn fetch_sessions(&self) -> &crate::api::fetch_session::FetchSessions {
        &self.fetch
    }

    /// The listener the connection came in on.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether requests other than the SASL ones are served.
    pub(crate) fn is_authenticated(&self) -> bool {
        matches!(*self.state(), State::Authenticated(_))
    }

    /// Whether the authentication failed (the connection is to be closed after the delay).
    pub(crate) fn has_failed(&self) -> bool {
        matches!(*self.state(), State::Failed)
    }

    /// Whether the next frame is a bare SASL token (after a v0 handshake).
    pub(crate) fn expects_raw_token(&self) -> bool {
        matches!(*self.state(), State::Authenticating { raw: true, .. })
    }

    /// The authenticated principal, `User:name` (logged when the connection closes; the
    /// ACLs of a later step check it).
    pub(crate) fn principal(&self) -> Option<String> {
        match &*self.state() {
            State::Authenticated(p) => Some(p.clone()),
            _ => None,
        }
    }

    /// SaslHandshake at `version`: the error code and the enabled mechanisms.
    pub(crate) fn handshake(&self, mechanism: &str, version: i16) -> (i16, Vec<&'static str>) {
        let Some(auth) = &self.authenticator else {
            // Kafka's KafkaApis answers it on a listener without SASL.
            return (codes::ILLEGAL_SASL_STATE, Vec::new());
        };
        let enabled: Vec<&'static str> = auth.mechanisms.iter().map(|m| m.name()).collect();
        let mut state = self.state();
        match &*state {
            State::Handshake => {}
            // After authenticating (no re-authentication: Kafka's default
            // connections.max.reauth.ms=0) the connection stays served.
            State::Authenticated(_) => return (codes::ILLEGAL_SASL_STATE, enabled),
            _ => {
                *state = State::Failed;
                warn!(peer = %self.peer, "SaslHandshake out of order; closing the connection");
                return (codes::ILLEGAL_SASL_STATE, enabled);
            }
        }
        let Some(chosen) = auth.mechanisms.iter().find(|m| m.name() == mechanism) else {
            *state = State::Failed;
            warn!(peer = %self.peer, mechanism, enabled = %enabled.join(","), "authentication failed: SASL mechanism not enabled");
            return (codes::UNSUPPORTED_SASL_MECHANISM, enabled);
        };
        let exchange = match chosen {
            SaslMechanism::Plain => Exchange::Plain,
            SaslMechanism::ScramSha256 => scram_exchange(ScramHash::Sha256),
            SaslMechanism::ScramSha512 => scram_exchange(ScramHash::Sha512),
        };
        *state = State::Authenticating {
            exchange,
            raw: version == 0,
        };
        (codes::NONE, enabled)
    }

    /// One SASL token (a SaslAuthenticate request's, or a bare frame after a v0
    /// handshake): the server's token, or why the authentication failed. A failure is
    /// logged with the peer and the user name.
    pub(crate) fn authenticate(&self, token: &[u8]) -> Result<Vec<u8>, Refusal> {
        let mut state = self.state();
        let Some(auth) = &self.authenticator else {
            return Err((
                codes::ILLEGAL_SASL_STATE,
                "SaslAuthenticate request received on a listener without SASL".into(),
            ));
        };
        let exchange = match &mut *state {
            State::Authenticating { exchange, .. } => exchange,
            State::Authenticated(_) => {
                return Err((
                    codes::ILLEGAL_SASL_STATE,
                    "SaslAuthenticate request received after successful authentication".into(),
                ))
            }
            _ => {
                *state = State::Failed;
                warn!(peer = %self.peer, "SaslAuthenticate before SaslHandshake; closing the connection");
                return Err((
                    codes::ILLEGAL_SASL_STATE,
                    "Unexpected SaslAuthenticate request before SaslHandshake".into(),
                ));
            }
        };
        let (mechanism, outcome) = step(exchange, &auth.users, token);
        match outcome {
            Ok((response, Some(user))) => {
                info!(peer = %self.peer, user = %user, mechanism, "authenticated");
                *state = State::Authenticated(format!("User:{user}"));
                Ok(response)
            }
            Ok((response, None)) => Ok(response),
            Err((user, message)) => {
                warn!(peer = %self.peer, user = user.as_deref().unwrap_or(""), mechanism, reason = %message, "authentication failed");
                *state = State::Failed;
                Err((codes::SASL_AUTHENTICATION_FAILED, message))
            }
        }
    }
}

fn scram_exchange(hash: ScramHash) -> Exchange {
    Exchange::Scram(hash, scram::ScramServer::new(hash))
}

/// One step of an exchange: the response, with the user once authenticated; or the user
/// (if known) and the client's error message.
#[allow(clippy::type_complexity)]
fn step(
    exchange: &mut Exchange,
    users: &Users,
    token: &[u8],
) -> (
    &'static str,
    Result<(Vec<u8>, Option<String>), (Option<String>, String)>,
) {
    match exchange {
        Exchange::Plain => {
            let outcome = match plain::parse(token) {
                Err(e) => Err((None, e.to_string())),
                Ok(c) if users.check_password(c.user, c.password) => {
                    Ok((Vec::new(), Some(c.user.to_string())))
                }
                Ok(c) => Err((
                    Some(c.user.to_string()),
                    "Authentication failed: Invalid username or password".into(),
                )),
            };
            ("PLAIN", outcome)
        }
        Exchange::Scram(hash, server) => {
            let (hash, mechanism) = (*hash, hash.mechanism());
            let user = server.user().map(str::to_string);
            let nonce = match users::random_bytes(24) {
                Ok(bytes) => {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                }
                Err(e) => {
                    return (
                        mechanism,
                        Err((user, format!("Authentication failed: {e}"))),
                    )
                }
            };
            let outcome = match server.step(token, |u| users.scram(u, hash), &nonce) {
                Ok(scram::ScramStep::Continue(response)) => Ok((response, None)),
                Ok(scram::ScramStep::Done { response, user }) => Ok((response, Some(user))),
                Err(e) => Err((user.or_else(|| scram_user(token)), e.to_string())),
            };
            (mechanism, outcome)
        }
    }
}

/// The user name of a client-first message, for the log of a failure.
fn scram_user(token: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(token).ok()?;
    let start = s.find(",n=")? + 3;
    let rest = &s[start..];
    Some(rest[..rest.find(',').unwrap_or(rest.len())].to_string())
}
