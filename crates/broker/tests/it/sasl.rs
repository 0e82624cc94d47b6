//! SASL on a SASL_PLAINTEXT listener over the wire: only ApiVersions and the SASL APIs
//! before authentication, PLAIN and SCRAM-SHA-256/512 exchanges (the client side written
//! here from RFC 5802 with RustCrypto's primitives), failures answered with
//! SASL_AUTHENTICATION_FAILED then closed, and the binary's users-file checks.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sha2::{Digest, Sha256, Sha512};
use tokio::process::Command;

use crate::common::*;
use broker::{SaslMechanism, SecurityProtocol};

const USERS: &str = "# test users\nalice:alice-secret\nbob:b:o=b,\n";

/// A users file of mode 600 in a temporary directory (kept alive by the returned guard).
fn users_file(mode: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(USERS.as_bytes()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    (dir, path)
}

async fn sasl_broker(mechanisms: &[SaslMechanism]) -> (TestBroker, tempfile::TempDir) {
    let (dir, path) = users_file(0o600);
    let broker = TestBroker::with(broker::BrokerConfig {
        security_protocol: SecurityProtocol::SaslPlaintext,
        users_file: Some(path),
        sasl_enabled_mechanisms: mechanisms.to_vec(),
        connection_failed_authentication_delay_ms: 10,
        ..config()
    })
    .await;
    (broker, dir)
}

fn handshake(mechanism: &'static str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))
}

fn token(bytes: &[u8]) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(bytes))
}

fn metadata() -> MetadataRequest {
    MetadataRequest::default().with_topics(None)
}

/// Metadata is served: the connection is authenticated.
async fn served(c: &mut Client) {
    let r = c.call(&metadata(), 4).await;
    assert_eq!(r.brokers.len(), 1);
    assert!(r
        .topics
        .iter()
        .any(|t| t.name.as_ref().map(|n| n.as_str()) == Some("t")));
}

async fn plain(c: &mut Client, user: &str, password: &str) -> SaslAuthenticateResponse {
    let r = c.call(&handshake("PLAIN"), 1).await;
    assert_eq!(r.error_code, 0);
    let mechanisms: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
    assert!(mechanisms.contains(&"PLAIN"), "{mechanisms:?}");
    let message = format!("\0{user}\0{password}");
    c.call(&token(message.as_bytes()), 2).await
}

#[tokio::test]
async fn before_authentication_only_api_versions_and_sasl_are_answered() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    let mut c = broker.client().await;
    let r = c.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(r.error_code, 0);
    for (key, max) in [(ApiKey::SaslHandshake, 1), (ApiKey::SaslAuthenticate, 2)] {
        assert!(
            r.api_keys
                .iter()
                .any(|k| k.api_key == key as i16 && k.max_version == max),
            "{key:?} advertised"
        );
    }
    c.send(&metadata(), 4).await;
    assert!(c.is_closed().await, "Metadata before authentication closes");
    // So does a request of an unserved version of a non-SASL API, and one after a
    // handshake whose exchange has not finished.
    let mut c = broker.client().await;
    c.send(&HeartbeatRequest::default(), 4).await;
    assert!(c.is_closed().await);
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("PLAIN"), 1).await.error_code, 0);
    c.send(&metadata(), 4).await;
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn plain_with_the_right_password_authenticates_the_connection() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    let mut c = broker.client().await;
    let r = plain(&mut c, "alice", "alice-secret").await;
    assert_eq!((r.error_code, r.error_message), (0, None));
    served(&mut c).await;
    // A password with `:`, `=` and `,` (the name ends at the first `:`).
    let mut c = broker.client().await;
    assert_eq!(plain(&mut c, "bob", "b:o=b,").await.error_code, 0);
    served(&mut c).await;
    // No re-authentication: a second handshake is ILLEGAL_SASL_STATE, and the
    // connection stays served (Kafka's KafkaApis answer).
    assert_eq!(c.call(&handshake("PLAIN"), 1).await.error_code, 34);
    assert_eq!(c.call(&token(b"\0bob\0b:o=b,"), 2).await.error_code, 34);
    served(&mut c).await;
}

#[tokio::test]
async fn a_failed_plain_authentication_answers_58_then_closes() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    for (user, password) in [("alice", "wrong"), ("carol", "alice-secret")] {
        let mut c = broker.client().await;
        let r = plain(&mut c, user, password).await;
        assert_eq!(r.error_code, 58, "{user}");
        let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(
            message.contains("Invalid username or password"),
            "{message}"
        );
        assert!(!message.contains(password));
        assert!(c.is_closed().await, "closed after the delay");
    }
    // A malformed message (no NULs) is a failure too, not a crash.
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("PLAIN"), 1).await.error_code, 0);
    let r = c.call(&token(b"alice"), 0).await;
    assert_eq!(r.error_code, 58);
    assert!(c.is_closed().await);
    // The broker still serves others.
    let mut c = broker.client().await;
    assert_eq!(plain(&mut c, "alice", "alice-secret").await.error_code, 0);
}

#[tokio::test]
async fn a_disabled_mechanism_and_out_of_order_requests_are_refused() {
    let (broker, _users) = sasl_broker(&[SaslMechanism::ScramSha512]).await;
    let mut c = broker.client().await;
    let r = c.call(&handshake("PLAIN"), 1).await;
    assert_eq!(r.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let mechanisms: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(mechanisms, ["SCRAM-SHA-512"]);
    assert!(c.is_closed().await);
    let mut c = broker.client().await;
    let r = c.call(&token(b"\0alice\0alice-secret"), 1).await;
    assert_eq!(r.error_code, 34, "ILLEGAL_SASL_STATE before the handshake");
    assert!(c.is_closed().await);
}

#[tokio::test]
async fn before_authentication_a_frame_above_kafkas_sasl_receive_size_closes() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    // 512 KiB + 1: only the length is sent; the broker refuses it from the prefix alone.
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("PLAIN"), 1).await.error_code, 0);
    c.send_raw(&(524_289i32).to_be_bytes()).await;
    assert!(c.is_closed().await);
    // After authenticating, --max-frame-bytes (100 MiB by default) applies:
    // a 600 KiB Produce is read and answered.
    let mut c = broker.client().await;
    assert_eq!(plain(&mut c, "alice", "alice-secret").await.error_code, 0);
    let mut big = record(0, 1_700_000_000_000);
    big.value = Some(Bytes::from(vec![b'x'; 600 * 1024]));
    let batch = batch(&[big], kafka_protocol::records::Compression::None);
    assert_eq!(produce(&mut c, "t", 0, batch, 7).await, (0, 0));
}

#[tokio::test]
async fn sasl_on_a_plaintext_listener_is_illegal_state_and_harmless() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("PLAIN"), 1).await.error_code, 34);
    assert_eq!(c.call(&token(b"\0a\0b"), 2).await.error_code, 34);
    served(&mut c).await;
}

#[tokio::test]
async fn a_v0_handshake_takes_bare_tokens() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("PLAIN"), 0).await.error_code, 0);
    let message = b"\0alice\0alice-secret";
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(message);
    c.send_raw(&frame).await;
    let answer = c.read_frame().await.expect("an empty token back");
    assert!(answer.is_empty(), "{answer:?}");
    served(&mut c).await;
    // A wrong password closes the connection without an answer.
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("PLAIN"), 0).await.error_code, 0);
    let message = b"\0alice\0nope";
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(message);
    c.send_raw(&frame).await;
    assert!(c.is_closed().await);
}

// --- SCRAM, the client's side (RFC 5802) ---

#[derive(Clone, Copy)]
enum H {
    S256,
    S512,
}

fn hmac(h: H, key: &[u8], data: &[u8]) -> Vec<u8> {
    match h {
        H::S256 => Hmac::<Sha256>::new_from_slice(key)
            .unwrap()
            .chain_update(data)
            .finalize()
            .into_bytes()
            .to_vec(),
        H::S512 => Hmac::<Sha512>::new_from_slice(key)
            .unwrap()
            .chain_update(data)
            .finalize()
            .into_bytes()
            .to_vec(),
    }
}

fn salted(h: H, password: &str, salt: &[u8], i: u32) -> Vec<u8> {
    match h {
        H::S256 => pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, i).to_vec(),
        H::S512 => pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, i).to_vec(),
    }
}

fn digest(h: H, data: &[u8]) -> Vec<u8> {
    match h {
        H::S256 => Sha256::digest(data).to_vec(),
        H::S512 => Sha512::digest(data).to_vec(),
    }
}

/// A full SCRAM exchange at SaslAuthenticate `version`: the second answer, after checking
/// the server's signature when it succeeded.
async fn scram(
    c: &mut Client,
    h: H,
    user: &str,
    password: &str,
    version: i16,
) -> SaslAuthenticateResponse {
    let name = match h {
        H::S256 => "SCRAM-SHA-256",
        H::S512 => "SCRAM-SHA-512",
    };
    assert_eq!(c.call(&handshake(name), 1).await.error_code, 0);
    let client_nonce = "fyko+d2lbbFgONRv9qkxdawL";
    let first_bare = format!("n={user},r={client_nonce}");
    let r = c
        .call(&token(format!("n,,{first_bare}").as_bytes()), version)
        .await;
    if r.error_code != 0 {
        return r;
    }
    let server_first = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
    let mut parts = server_first.split(',');
    let nonce = parts.next().unwrap().strip_prefix("r=").unwrap();
    assert!(nonce.starts_with(client_nonce) && nonce.len() > client_nonce.len());
    let salt = BASE64
        .decode(parts.next().unwrap().strip_prefix("s=").unwrap())
        .unwrap();
    let iterations: u32 = parts
        .next()
        .unwrap()
        .strip_prefix("i=")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(iterations, 4096, "Kafka's iteration count");
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let salted = salted(h, password, &salt, iterations);
    let client_key = hmac(h, &salted, b"Client Key");
    let stored_key = digest(h, &client_key);
    let signature = hmac(h, &stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let last = format!("{without_proof},p={}", BASE64.encode(proof));
    let r = c.call(&token(last.as_bytes()), version).await;
    if r.error_code == 0 {
        let server_key = hmac(h, &salted, b"Server Key");
        let expected = hmac(h, &server_key, auth_message.as_bytes());
        let expected = format!("v={}", BASE64.encode(expected));
        assert_eq!(
            r.auth_bytes,
            expected.as_bytes(),
            "the server proves it knows the key"
        );
    }
    r
}

#[tokio::test]
async fn scram_sha_256_and_512_full_exchanges() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    for (h, version) in [(H::S256, 1), (H::S512, 2), (H::S256, 0)] {
        let mut c = broker.client().await;
        let r = scram(&mut c, h, "alice", "alice-secret", version).await;
        assert_eq!((r.error_code, r.error_message), (0, None));
        served(&mut c).await;
    }
    let mut c = broker.client().await;
    assert_eq!(
        scram(&mut c, H::S512, "bob", "b:o=b,", 2).await.error_code,
        0
    );
}

#[tokio::test]
async fn a_failed_scram_exchange_answers_58_then_closes() {
    let (broker, _users) = sasl_broker(&SaslMechanism::ALL).await;
    for (h, user, password) in [
        (H::S256, "alice", "wrong"),
        (H::S512, "alice", "wrong"),
        (H::S256, "carol", "alice-secret"),
    ] {
        let mut c = broker.client().await;
        let r = scram(&mut c, h, user, password, 2).await;
        assert_eq!(r.error_code, 58, "{user}");
        let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(message.starts_with("Authentication failed"), "{message}");
        assert!(c.is_closed().await);
    }
    // A malformed client-first, then a replayed client-final on a new connection (its
    // nonce is not the new server nonce).
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("SCRAM-SHA-256"), 1).await.error_code, 0);
    assert_eq!(c.call(&token(b"n,,garbage"), 2).await.error_code, 58);
    assert!(c.is_closed().await);
    let mut c = broker.client().await;
    assert_eq!(c.call(&handshake("SCRAM-SHA-256"), 1).await.error_code, 0);
    let r = c.call(&token(b"n,,n=alice,r=abc"), 2).await;
    assert_eq!(r.error_code, 0);
    let replayed = b"c=biws,r=abcstale,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let r = c.call(&token(replayed), 2).await;
    assert_eq!(r.error_code, 58);
    assert!(c.is_closed().await);
}

/// Runs the binary with `args`, which must refuse to start: its stderr.
async fn refused(args: &[&str]) -> String {
    let out = bounded(
        "refused start",
        Command::new(env!("CARGO_BIN_EXE_broker"))
            .args(args)
            .output(),
    )
    .await
    .expect("runs");
    assert!(!out.status.success(), "{args:?}");
    assert!(out.stdout.is_empty(), "no listening line");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The binary: a users file others may read is refused at start with the fix named; a
/// private one starts a SASL_PLAINTEXT listener that refuses Metadata before
/// authentication.
#[tokio::test]
async fn the_binary_checks_the_users_file_mode() {
    for mode in [0o644, 0o640] {
        let (_dir, path) = users_file(mode);
        let path = path.to_str().unwrap();
        let err = refused(&["--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--users", path]).await;
        assert!(
            err.contains("invalid setting `users`") && err.contains("chmod 600"),
            "{err}"
        );
        assert!(!err.contains("alice-secret"), "{err}");
    }
    for (args, expect) in [
        (
            vec!["--listen", "SASL_PLAINTEXT://127.0.0.1:0"],
            "needs --users",
        ),
        (
            vec!["--listen", "SSL://127.0.0.1:0"],
            "needs --ssl-certificate",
        ),
        (
            vec![
                "--listen",
                "SASL_PLAINTEXT://127.0.0.1:0",
                "--sasl-enabled-mechanisms",
                "GSSAPI",
            ],
            "not served",
        ),
    ] {
        let err = refused(&args).await;
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    let (_dir, path) = users_file(0o600);
    let mut child = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--users"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("starts");
    use tokio::io::AsyncBufReadExt as _;
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = bounded("listening", lines.next_line())
        .await
        .unwrap()
        .unwrap();
    let addr = line.strip_prefix("listening on ").unwrap().parse().unwrap();
    let mut c = Client::connect(addr).await;
    let r = plain(&mut c, "alice", "alice-secret").await;
    assert_eq!(r.error_code, 0);
    let mut c = Client::connect(addr).await;
    c.send(&metadata(), 4).await;
    assert!(c.is_closed().await);
    child.kill().await.unwrap();
}
