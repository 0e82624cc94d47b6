//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, as Kafka serves
//! them: credentials derived with PBKDF2 (4096 iterations by default, Kafka's), the
//! client-first → server-first → client-final → server-final exchange. The primitives
//! (HMAC, SHA-2, PBKDF2, the constant-time comparison) are RustCrypto's; the message flow
//! is written here.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Kafka's default iteration count for SCRAM credentials (`kafka-configs --add-config
/// 'SCRAM-SHA-256=[iterations=4096,...]'`), and RFC 7677's example.
pub(crate) const ITERATIONS: u32 = 4096;

/// The hash function of a SCRAM mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

/// Why a SCRAM exchange failed. The message goes to the client (it never holds a secret)
/// and to the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScramError {
    /// The client's message does not follow RFC 5802.
    #[error("Authentication failed: invalid SCRAM {0}")]
    Malformed(&'static str),
    /// Something RFC 5802 allows that Kafka does not serve (channel binding, delegation
    /// tokens, an authorization id that is not the user).
    #[error("Authentication failed: {0}")]
    Unsupported(&'static str),
    /// The user is not known.
    #[error("Authentication failed: Invalid user credentials")]
    UnknownUser,
    /// The proof does not match the stored key: a wrong password.
    #[error("Authentication failed during authentication due to invalid credentials with SASL mechanism {0}")]
    BadProof(&'static str),
}

type Result<T> = std::result::Result<T, ScramError>;

impl ScramHash {
    /// The mechanism's name.
    pub(crate) fn mechanism(self) -> &'static str {
        match self {
            ScramHash::Sha256 => "SCRAM-SHA-256",
            ScramHash::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: `new_from_slice` cannot fail; an empty result
        // would never match a stored key of the digest's length.
        match self {
            ScramHash::Sha256 => Hmac::<Sha256>::new_from_slice(key)
                .map(|m| m.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
            ScramHash::Sha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|m| m.chain_update(data).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn len(self) -> usize {
        match self {
            ScramHash::Sha256 => 32,
            ScramHash::Sha512 => 64,
        }
    }

    /// RFC 5802's SaltedPassword: PBKDF2 with HMAC of this hash.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        match self {
            ScramHash::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramHash::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

/// What the broker keeps of a password for one SCRAM mechanism (Kafka's `ScramCredential`):
/// the salt, the iteration count, StoredKey and ServerKey. The password itself is not kept.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ScramCredential {
    pub(crate) hash: ScramHash,
    pub(crate) salt: Vec<u8>,
    pub(crate) iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("hash", &self.hash)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// Derives the credential of `password` with `salt`.
    pub(crate) fn derive(hash: ScramHash, password: &[u8], salt: &[u8], iterations: u32) -> Self {
        let salted = hash.salted_password(password, salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        ScramCredential {
            hash,
            salt: salt.to_vec(),
            iterations,
            stored_key: hash.hash(&client_key),
            server_key: hash.hmac(&salted, b"Server Key"),
        }
    }

    /// The credential of a salted password (SaltedPassword = Hi(password, salt, i), as
    /// AlterUserScramCredentials carries it: the client derives it, the password never
    /// travels).
    pub(crate) fn from_salted(
        hash: ScramHash,
        salt: &[u8],
        iterations: u32,
        salted: &[u8],
    ) -> Self {
        let client_key = hash.hmac(salted, b"Client Key");
        ScramCredential {
            hash,
            salt: salt.to_vec(),
            iterations,
            stored_key: hash.hash(&client_key),
            server_key: hash.hmac(salted, b"Server Key"),
        }
    }

    /// StoredKey and ServerKey, for the data directory's copy.
    pub(crate) fn keys(&self) -> (&[u8], &[u8]) {
        (&self.stored_key, &self.server_key)
    }

    /// A credential read back from the data directory.
    pub(crate) fn from_keys(
        hash: ScramHash,
        salt: Vec<u8>,
        iterations: u32,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
    ) -> Self {
        ScramCredential {
            hash,
            salt,
            iterations,
            stored_key,
            server_key,
        }
    }

    /// Whether `password` is the one this credential was derived from (for PLAIN, which
    /// is checked against the derived keys: no password is kept in memory). Constant time
    /// in the comparison.
    pub(crate) fn matches_password(&self, password: &[u8]) -> bool {
        let other = ScramCredential::derive(self.hash, password, &self.salt, self.iterations);
        bool::from(other.stored_key.ct_eq(&self.stored_key))
    }
}

/// The server's side of one SCRAM exchange.
#[derive(Debug)]
pub(crate) enum ScramServer {
    /// Waiting for client-first.
    First(ScramHash),
    /// server-first sent; waiting for client-final.
    Final(Box<Pending>),
    /// Finished (successfully or not): any further message is out of order.
    Done,
}

/// What client-final is checked against.
#[derive(Debug)]
pub(crate) struct Pending {
    user: String,
    credential: ScramCredential,
    gs2_header: String,
    nonce: String,
    /// client-first-bare "," server-first, the first two parts of AuthMessage.
    auth_message_start: String,
}

/// What one client message leads to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScramStep {
    /// server-first: send it, wait for client-final.
    Continue(Vec<u8>),
    /// server-final: send it; `user` is authenticated.
    Done { response: Vec<u8>, user: String },
}

impl ScramServer {
    /// A new exchange for `hash`.
    pub(crate) fn new(hash: ScramHash) -> Self {
        ScramServer::First(hash)
    }

    /// The user named in client-first, once it was read (for the log).
    pub(crate) fn user(&self) -> Option<&str> {
        match self {
            ScramServer::Final(p) => Some(&p.user),
            _ => None,
        }
    }

    /// Answers the next client message. `lookup` finds a user's credential;
    /// `server_nonce` is appended to the client's nonce (printable, no `,`).
    pub(crate) fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<ScramStep> {
        match std::mem::replace(self, ScramServer::Done) {
            ScramServer::First(hash) => {
                let (pending, server_first) = client_first(hash, message, lookup, server_nonce)?;
                *self = ScramServer::Final(Box::new(pending));
                Ok(ScramStep::Continue(server_first.into_bytes()))
            }
            ScramServer::Final(pending) => client_final(&pending, message),
            ScramServer::Done => Err(ScramError::Malformed("message after the exchange ended")),
        }
    }
}

/// RFC 5802's saslname: `=2C` is `,`, `=3D` is `=`, any other `=` is malformed.
fn decode_saslname(s: &str) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if after.starts_with("2C") {
            out.push(',');
        } else if after.starts_with("3D") {
            out.push('=');
        } else {
            return Err(ScramError::Malformed(
                "client first message: bad `=` escape in the user name",
            ));
        }
        rest = &after[2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn client_first(
    hash: ScramHash,
    message: &[u8],
    lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    server_nonce: &str,
) -> Result<(Pending, String)> {
    const WHAT: &str = "client first message";
    let bad = |_| ScramError::Malformed(WHAT);
    let s = std::str::from_utf8(message).map_err(bad)?;
    // gs2-header: cbind-flag "," [authzid] ","
    let (flag, rest) = s.split_once(',').ok_or(ScramError::Malformed(WHAT))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => {
            return Err(ScramError::Unsupported(
                "SCRAM channel binding is not supported",
            ))
        }
        _ => return Err(ScramError::Malformed(WHAT)),
    }
    let (authzid, bare) = rest.split_once(',').ok_or(ScramError::Malformed(WHAT))?;
    let gs2_header = &s[..flag.len() + 1 + authzid.len() + 1];
    let mut attributes = bare.split(',');
    let user = attributes
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or(ScramError::Malformed(WHAT))?;
    let user = decode_saslname(user)?;
    let client_nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| !n.is_empty())
        .ok_or(ScramError::Malformed(WHAT))?;
    // Extensions (Kafka's KIP-342); the one Kafka acts on, delegation tokens, is not served.
    for extension in attributes {
        if extension == "tokenauth=true" {
            return Err(ScramError::Unsupported(
                "delegation tokens are not supported",
            ));
        }
    }
    if user.is_empty() {
        return Err(ScramError::Malformed(WHAT));
    }
    if !authzid.is_empty() {
        let authzid = authzid
            .strip_prefix("a=")
            .ok_or(ScramError::Malformed(WHAT))?;
        if decode_saslname(authzid)? != user {
            return Err(ScramError::Unsupported(
                "the authorization id is not the user name",
            ));
        }
    }
    let credential = lookup(&user).ok_or(ScramError::UnknownUser)?;
    if credential.hash != hash {
        return Err(ScramError::UnknownUser);
    }
    let nonce = format!("{client_nonce}{server_nonce}");
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    );
    let pending = Pending {
        auth_message_start: format!("{bare},{server_first}"),
        user,
        credential,
        gs2_header: gs2_header.to_string(),
        nonce,
    };
    Ok((pending, server_first))
}

fn client_final(pending: &Pending, message: &[u8]) -> Result<ScramStep> {
    const WHAT: &str = "client final message";
    fn bad<E>(_: E) -> ScramError {
        ScramError::Malformed(WHAT)
    }
    let s = std::str::from_utf8(message).map_err(bad)?;
    let proof_at = s.rfind(",p=").ok_or(ScramError::Malformed(WHAT))?;
    let without_proof = &s[..proof_at];
    let proof = BASE64.decode(&s[proof_at + 3..]).map_err(bad)?;
    let mut attributes = without_proof.split(',');
    let binding = attributes
        .next()
        .and_then(|a| a.strip_prefix("c="))
        .ok_or(ScramError::Malformed(WHAT))?;
    let binding = BASE64.decode(binding).map_err(bad)?;
    if binding != pending.gs2_header.as_bytes() {
        return Err(ScramError::Malformed(
            "client final message: the channel binding is not the gs2 header",
        ));
    }
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(ScramError::Malformed(WHAT))?;
    if nonce != pending.nonce {
        return Err(ScramError::Malformed(
            "client final message: the nonce is not the server's",
        ));
    }
    let c = &pending.credential;
    let hash = c.hash;
    if proof.len() != hash.len() {
        return Err(ScramError::Malformed(
            "client final message: the proof has the wrong length",
        ));
    }
    let auth_message = format!("{},{without_proof}", pending.auth_message_start);
    let client_signature = hash.hmac(&c.stored_key, auth_message.as_bytes());
    let client_key: Vec<u8> = proof
        .iter()
        .zip(&client_signature)
        .map(|(p, s)| p ^ s)
        .collect();
    if !bool::from(hash.hash(&client_key).ct_eq(&c.stored_key)) {
        return Err(ScramError::BadProof(hash.mechanism()));
    }
    let server_signature = hash.hmac(&c.server_key, auth_message.as_bytes());
    Ok(ScramStep::Done {
        response: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        user: pending.user.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc7677_credential(password: &str) -> ScramCredential {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        ScramCredential::derive(ScramHash::Sha256, password.as_bytes(), &salt, 4096)
    }

    fn exchange(password: &str, first: &str, last: &str) -> (Result<ScramStep>, Result<ScramStep>) {
        let credential = rfc7677_credential(password);
        let mut server = ScramServer::new(ScramHash::Sha256);
        let lookup = |u: &str| (u == "user").then(|| credential.clone());
        let one = server.step(first.as_bytes(), lookup, SERVER_NONCE);
        let two = server.step(last.as_bytes(), |_| None, "unused");
        (one, two)
    }

    /// RFC 7677 section 3's example exchange, byte for byte.
    #[test]
    fn the_rfc_7677_test_vector() {
        let (one, two) = exchange("pencil", CLIENT_FIRST, CLIENT_FINAL);
        assert_eq!(
            one,
            Ok(ScramStep::Continue(SERVER_FIRST.as_bytes().to_vec()))
        );
        assert_eq!(
            two,
            Ok(ScramStep::Done {
                response: SERVER_FINAL.as_bytes().to_vec(),
                user: "user".into()
            })
        );
    }

    #[test]
    fn a_wrong_password_fails_the_proof() {
        let (one, two) = exchange("pencils", CLIENT_FIRST, CLIENT_FINAL);
        assert!(one.is_ok());
        assert_eq!(two, Err(ScramError::BadProof("SCRAM-SHA-256")));
        assert!(two.unwrap_err().to_string().contains("invalid credentials"));
    }

    #[test]
    fn an_unknown_user_fails_at_client_first() {
        let (one, two) = exchange("pencil", "n,,n=someone,r=abc", CLIENT_FINAL);
        assert_eq!(one, Err(ScramError::UnknownUser));
        // The exchange is over: nothing further is accepted.
        assert!(matches!(two, Err(ScramError::Malformed(_))));
    }

    #[test]
    fn a_credential_of_the_other_hash_is_not_used() {
        let salt = b"salt";
        let c = ScramCredential::derive(ScramHash::Sha512, b"pencil", salt, 4096);
        let mut server = ScramServer::new(ScramHash::Sha256);
        let r = server.step(CLIENT_FIRST.as_bytes(), |_| Some(c), "x");
        assert_eq!(r, Err(ScramError::UnknownUser));
    }

    #[test]
    fn malformed_messages_are_errors_never_panics() {
        let firsts: &[&[u8]] = &[
            b"",
            b"n",
            b"n,",
            b"x,,n=user,r=a",
            b"n,,r=a,n=user",
            b"n,,n=user",
            b"n,,n=user,r=",
            b"n,,n=,r=a",
            b"n,,n=us=er,r=a",
            b"n,,n=us=2",
            b"n,b=x,n=user,r=a",
            b"\xff\xfe,,n=user,r=a",
        ];
        for first in firsts {
            let (one, _) = exchange(
                "pencil",
                std::str::from_utf8(first).unwrap_or("\u{fffd}"),
                "",
            );
            assert!(
                matches!(one, Err(ScramError::Malformed(_))),
                "{first:?}: {one:?}"
            );
            let mut server = ScramServer::new(ScramHash::Sha256);
            assert!(server.step(first, |_| None, "n").is_err());
        }
        let unsupported = [
            "p=tls-unique,,n=user,r=a",
            "n,a=other,n=user,r=a",
            "n,,n=user,r=a,tokenauth=true",
        ];
        for first in unsupported {
            let (one, _) = exchange("pencil", first, "");
            assert!(
                matches!(one, Err(ScramError::Unsupported(_))),
                "{first}: {one:?}"
            );
        }
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let finals = [
            String::new(),
            "c=biws".into(),
            format!("c=biws,r={nonce}"),
            format!("c=biws,r={nonce},p=!!"),
            format!("c=biws,r={nonce},p=AAAA"),
            format!("c=eSws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
            "c=biws,r=rOprNGfwEbeRWgbNEkqOreplayed,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
                .into(),
            format!("r={nonce},c=biws,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        ];
        for last in &finals {
            let (one, two) = exchange("pencil", CLIENT_FIRST, last);
            assert!(one.is_ok());
            assert!(
                matches!(two, Err(ScramError::Malformed(_))),
                "{last}: {two:?}"
            );
        }
    }

    #[test]
    fn an_authorization_id_equal_to_the_user_and_escaped_names_are_accepted() {
        assert_eq!(decode_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
        let c = ScramCredential::derive(ScramHash::Sha512, b"pw", b"salt", 4096);
        let mut server = ScramServer::new(ScramHash::Sha512);
        let r = server.step(
            b"n,a=u=2Cv,n=u=2Cv,r=abc",
            |u| (u == "u,v").then(|| c.clone()),
            "def",
        );
        assert_eq!(
            r,
            Ok(ScramStep::Continue(
                format!("r=abcdef,s={},i=4096", BASE64.encode(b"salt")).into_bytes()
            ))
        );
        assert_eq!(server.user(), Some("u,v"));
    }

    #[test]
    fn a_plain_password_is_checked_against_the_derived_keys() {
        let c = rfc7677_credential("pencil");
        assert!(c.matches_password(b"pencil"));
        assert!(!c.matches_password(b"pencil "));
        assert!(!c.matches_password(b""));
        assert!(!format!("{c:?}").contains("stored_key"));
    }
}
