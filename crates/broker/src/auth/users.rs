//! The users of `--users FILE`: `name:password` lines, read once at start. Only the SCRAM
//! credentials derived from each password (random salt, 4096 iterations) are kept.
//!
//! AlterUserScramCredentials changes them at run time; with a data directory each change is
//! kept in `<data-dir>/scram-credentials.json` (mode 600: it holds StoredKey and ServerKey,
//! never a password) and applied over the users file at every start, so a credential set or
//! deleted through the API stays so across restarts.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{PoisonError, RwLock};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::scram::{ScramCredential, ScramHash, ITERATIONS};
use crate::documents::Documents;
use crate::error::BrokerError;

/// The file of a data directory holding the credentials changed at run time.
pub(crate) const CREDENTIALS_FILE: &str = "scram-credentials.json";

/// The salt's length in bytes.
const SALT_BYTES: usize = 32;

/// Every user's SCRAM credentials (one per mechanism, at most), and where run-time changes are
/// kept.
#[derive(Debug, Default)]
pub(crate) struct Users {
    credentials: RwLock<HashMap<String, Vec<ScramCredential>>>,
    /// The changes made at run time, (user, mechanism) → the credential, or `None` for a
    /// deletion; written whole to `store` before they take effect.
    changes: tokio::sync::Mutex<Kept>,
    store: Option<Documents>,
    /// The users of the `--users` file, before any change made at run time.
    base: HashMap<String, Vec<ScramCredential>>,
}

/// The changes made at run time: (user, mechanism) → the credential, or `None` for a
/// deletion.
type Kept = BTreeMap<(String, String), Option<StoredCredential>>;

/// The changes of a kept credentials document (none without one).
fn parse_changes(bytes: Option<&[u8]>) -> Result<Kept, String> {
    let Some(bytes) = bytes else {
        return Ok(Kept::new());
    };
    let file: CredentialsFile =
        serde_json::from_slice(bytes).map_err(|e| format!("not a credentials file: {e}"))?;
    if file.version != 1 {
        return Err(format!(
            "version {} is not known to this broker (1 is)",
            file.version
        ));
    }
    Ok(file
        .changes
        .into_iter()
        .map(|(user, mechanism, stored)| ((user, mechanism), stored))
        .collect())
}

/// The users of `base` with the `kept` changes applied.
fn merged(
    base: &HashMap<String, Vec<ScramCredential>>,
    kept: &Kept,
) -> Result<HashMap<String, Vec<ScramCredential>>, String> {
    let mut credentials = base.clone();
    for ((user, mechanism), stored) in kept {
        let hash = hash_of(mechanism).ok_or_else(|| format!("unknown mechanism {mechanism}"))?;
        let list = credentials.entry(user.clone()).or_default();
        list.retain(|c| c.hash != hash);
        if let Some(stored) = stored {
            list.push(
                stored
                    .credential(hash)
                    .map_err(|e| format!("user {user}: {e}"))?,
            );
        }
        if list.is_empty() {
            credentials.remove(user);
        }
    }
    Ok(credentials)
}

/// One credential as the data directory keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredCredential {
    salt: String,
    iterations: u32,
    stored_key: String,
    server_key: String,
}

#[derive(Serialize, Deserialize)]
struct CredentialsFile {
    version: u32,
    /// (user, mechanism, credential or null for deleted)
    changes: Vec<(String, String, Option<StoredCredential>)>,
}

/// One change AlterUserScramCredentials asks for: set `user`'s credential for a mechanism,
/// or delete it.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    Upsert(String, ScramCredential),
    Delete(String, ScramHash),
}

fn hash_of(mechanism: &str) -> Option<ScramHash> {
    [ScramHash::Sha256, ScramHash::Sha512]
        .into_iter()
        .find(|h| h.mechanism() == mechanism)
}

impl StoredCredential {
    fn of(c: &ScramCredential) -> StoredCredential {
        let (stored, server) = c.keys();
        StoredCredential {
            salt: BASE64.encode(&c.salt),
            iterations: c.iterations,
            stored_key: BASE64.encode(stored),
            server_key: BASE64.encode(server),
        }
    }

    fn credential(&self, hash: ScramHash) -> Result<ScramCredential, String> {
        let b = |s: &str| BASE64.decode(s).map_err(|e| format!("bad base64: {e}"));
        Ok(ScramCredential::from_keys(
            hash,
            b(&self.salt)?,
            self.iterations,
            b(&self.stored_key)?,
            b(&self.server_key)?,
        ))
    }
}

fn invalid(reason: String) -> BrokerError {
    BrokerError::InvalidConfig {
        setting: "users",
        reason,
    }
}

impl Users {
    /// Reads `path`: refused unless only its owner may read or write it (mode `600` or
    /// stricter), as ssh refuses a readable key.
    pub(crate) fn load(path: &Path) -> Result<Users, BrokerError> {
        let shown = path.display();
        let metadata =
            std::fs::metadata(path).map_err(|e| invalid(format!("cannot read `{shown}`: {e}")))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(invalid(format!(
                    "`{shown}` holds passwords and has mode {mode:03o}: group and others may \
                     access it; make it readable by its owner only (chmod 600 {shown})"
                )));
            }
        }
        #[cfg(not(unix))]
        let _ = metadata;
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(format!("cannot read `{shown}`: {e}")))?;
        Users::parse(&text, random_salt).map_err(|e| invalid(format!("`{shown}`: {e}")))
    }
    /// Keeps run-time changes in `documents` from now on, after applying those `kept` holds
    /// (the document [`CREDENTIALS_FILE`] as loaded from there, if any).
    ///
    /// # Errors
    /// `INVALID_CONFIG` (setting `users`) if the document cannot be parsed.
    pub(crate) fn with_store(
        mut self,
        documents: Documents,
        kept: Option<&[u8]>,
    ) -> Result<Users, BrokerError> {
        let shown = documents.shown(CREDENTIALS_FILE);
        let changes = parse_changes(kept).map_err(|e| invalid(format!("`{shown}`: {e}")))?;
        let credentials =
            merged(&self.base, &changes).map_err(|e| invalid(format!("`{shown}`: {e}")))?;
        self.credentials = RwLock::new(credentials);
        self.changes = tokio::sync::Mutex::new(changes);
        self.store = Some(documents);
        Ok(self)
    }

    /// Reads the kept changes again (several brokers over one database: another one may have
    /// changed credentials), keeping those in force if they cannot be read.
    pub(crate) async fn refresh(&self) {
        let Some(documents) = self.store.as_ref().filter(|d| d.is_shared()) else {
            return;
        };
        let mut kept = self.changes.lock().await;
        let read = documents
            .load(CREDENTIALS_FILE)
            .await
            .and_then(|b| parse_changes(b.as_deref()))
            .and_then(|changes| merged(&self.base, &changes).map(|c| (changes, c)));
        match read {
            Ok((changes, credentials)) => {
                *kept = changes;
                *self
                    .credentials
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = credentials;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the SCRAM credentials again; those in force stay")
            }
        }
    }

    /// Every user with the mechanisms and iteration counts of their credentials.
    pub(crate) fn describe(&self) -> BTreeMap<String, Vec<(ScramHash, u32)>> {
        self.read()
            .iter()
            .map(|(user, creds)| {
                let mut infos: Vec<(ScramHash, u32)> =
                    creds.iter().map(|c| (c.hash, c.iterations)).collect();
                infos.sort_by_key(|(h, _)| h.mechanism());
                (user.clone(), infos)
            })
            .collect()
    }

    /// Applies `changes` together: first written to the data directory (if any), then in
    /// force. A failed write changes nothing.
    ///
    /// # Errors
    /// The write's error.
    pub(crate) async fn alter(&self, changes: Vec<Change>) -> Result<(), String> {
        let mut kept = self.changes.lock().await;
        let apply = |mut next: Kept| {
            for change in &changes {
                match change {
                    Change::Upsert(user, c) => next.insert(
                        (user.clone(), c.hash.mechanism().to_string()),
                        Some(StoredCredential::of(c)),
                    ),
                    Change::Delete(user, hash) => {
                        next.insert((user.clone(), hash.mechanism().to_string()), None)
                    }
                };
            }
            next
        };
        let next = match &self.store {
            // The changes as kept (another broker over the same database may have made
            // some), with these applied, written back in one step.
            Some(documents) => {
                let mut written = None;
                documents
                    .update(CREDENTIALS_FILE, true, |bytes| {
                        let next = apply(parse_changes(bytes.as_deref())?);
                        let file = CredentialsFile {
                            version: 1,
                            changes: next
                                .iter()
                                .map(|((u, m), c)| (u.clone(), m.clone(), c.clone()))
                                .collect(),
                        };
                        let bytes = serde_json::to_vec_pretty(&file)
                            .map_err(|e| format!("encoding the credentials: {e}"))?;
                        written = Some(next);
                        Ok(Some(bytes))
                    })
                    .await?;
                written.ok_or("the credentials were not changed")?
            }
            None => apply(kept.clone()),
        };
        let credentials = merged(&self.base, &next)?;
        *kept = next;
        *self
            .credentials
            .write()
            .unwrap_or_else(PoisonError::into_inner) = credentials;
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Vec<ScramCredential>>> {
        self.credentials
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Parses `name:password` lines (the name ends at the first `:`; blank lines and lines
    /// starting with `#` are skipped). An error names the line, never its password.
    pub(crate) fn parse(
        text: &str,
        mut salt: impl FnMut() -> Result<Vec<u8>, String>,
    ) -> Result<Users, String> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, password)) = line.split_once(':') else {
                return Err(format!("line {n} is not `name:password`"));
            };
            if name.is_empty() || password.is_empty() {
                return Err(format!(
                    "line {n}: the name and the password must not be empty"
                ));
            }
            if users.contains_key(name) {
                return Err(format!("line {n}: user `{name}` is listed twice"));
            }
            let derive = |hash, salt: Vec<u8>| {
                ScramCredential::derive(hash, password.as_bytes(), &salt, ITERATIONS)
            };
            let credentials = vec![
                derive(ScramHash::Sha256, salt()?),
                derive(ScramHash::Sha512, salt()?),
            ];
            users.insert(name.to_string(), credentials);
        }
        Ok(Users {
            credentials: RwLock::new(users.clone()),
            base: users,
            ..Users::default()
        })
    }

    /// How many users there are.
    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }

    /// `user`'s credential for `hash`.
    pub(crate) fn scram(&self, user: &str, hash: ScramHash) -> Option<ScramCredential> {
        self.read()
            .get(user)
            .and_then(|c| c.iter().find(|c| c.hash == hash))
            .cloned()
    }

    /// Whether `password` is `user`'s (PLAIN), checked against the SHA-256 credential (or
    /// the SHA-512 one, for a user who has only that).
    pub(crate) fn check_password(&self, user: &str, password: &str) -> bool {
        self.scram(user, ScramHash::Sha256)
            .or_else(|| self.scram(user, ScramHash::Sha512))
            .is_some_and(|c| c.matches_password(password.as_bytes()))
    }
}

/// Random bytes from the operating system's generator.
pub(crate) fn random_bytes(n: usize) -> Result<Vec<u8>, String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random bytes from the OS: {e}"))?;
    Ok(bytes)
}

fn random_salt() -> Result<Vec<u8>, String> {
    random_bytes(SALT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_give_users_with_their_own_salts() {
        let users = Users::parse("# users\nalice:secret\n\nbob:pa:ss\r\n", random_salt).unwrap();
        assert_eq!(users.len(), 2);
        assert!(users.check_password("alice", "secret"));
        assert!(
            users.check_password("bob", "pa:ss"),
            "the name ends at the first `:`"
        );
        assert!(!users.check_password("alice", "pa:ss"));
        assert!(!users.check_password("carol", "secret"));
        let a = users.scram("alice", ScramHash::Sha256).unwrap();
        let b = users.scram("alice", ScramHash::Sha512).unwrap();
        assert_eq!((a.iterations, a.salt.len()), (4096, 32));
        assert_ne!(a.salt, b.salt, "a salt per credential");
        let again = Users::parse("alice:secret", random_salt).unwrap();
        assert_ne!(
            again.scram("alice", ScramHash::Sha256),
            Some(a),
            "random salts"
        );
    }

    #[tokio::test]
    async fn changes_take_effect_persist_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let docs = |d: &Path| Documents::Dir(d.to_path_buf());
        let kept = |d: &Path| std::fs::read(d.join(CREDENTIALS_FILE)).ok();
        let users = Users::parse("alice:secret\nbob:b", random_salt)
            .unwrap()
            .with_store(docs(dir.path()), kept(dir.path()).as_deref())
            .unwrap();
        let salt = b"fresh-salt".to_vec();
        let salted = ScramHash::Sha512.salted_password(b"new-secret", &salt, 8192);
        let upsert = ScramCredential::from_salted(ScramHash::Sha512, &salt, 8192, &salted);
        assert_eq!(
            upsert,
            ScramCredential::derive(ScramHash::Sha512, b"new-secret", &salt, 8192),
            "a salted password gives the password's credential"
        );
        users
            .alter(vec![
                Change::Upsert("carol".into(), upsert.clone()),
                Change::Delete("alice".into(), ScramHash::Sha256),
                Change::Delete("bob".into(), ScramHash::Sha256),
                Change::Delete("bob".into(), ScramHash::Sha512),
            ])
            .await
            .unwrap();
        let check = |users: &Users| {
            assert_eq!(
                users.scram("carol", ScramHash::Sha512),
                Some(upsert.clone())
            );
            assert!(
                users.check_password("carol", "new-secret"),
                "PLAIN by SHA-512"
            );
            assert!(users.scram("alice", ScramHash::Sha256).is_none());
            assert!(
                users.check_password("alice", "secret"),
                "alice keeps SHA-512"
            );
            assert!(!users.describe().contains_key("bob"), "bob has none left");
        };
        check(&users);
        let path = dir.path().join(CREDENTIALS_FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert!(!std::fs::read_to_string(&path).unwrap().contains("secret"));
        let again = Users::parse("alice:secret\nbob:b", random_salt)
            .unwrap()
            .with_store(docs(dir.path()), kept(dir.path()).as_deref())
            .unwrap();
        check(&again);
        // a store that cannot be written: nothing changes
        let gone = Users::parse("alice:secret", random_salt)
            .unwrap()
            .with_store(docs(&dir.path().join("missing")), None)
            .unwrap();
        assert!(gone
            .alter(vec![Change::Delete("alice".into(), ScramHash::Sha256)])
            .await
            .is_err());
        assert!(gone.scram("alice", ScramHash::Sha256).is_some());
    }

    #[test]
    fn bad_lines_are_named_without_their_password() {
        for (text, expect) in [
            ("alice", "line 1 is not"),
            ("alice:x\n:hunter2", "line 2"),
            ("alice:", "must not be empty"),
            ("alice:x\nalice:hunter2", "listed twice"),
        ] {
            let err = Users::parse(text, random_salt).unwrap_err();
            assert!(err.contains(expect), "{err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        let err = Users::parse("alice:x", || Err("no entropy".into())).unwrap_err();
        assert_eq!(err, "no entropy");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(&path, "alice:secret\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = Users::load(&path).unwrap_err();
            assert_eq!(err.code(), "INVALID_CONFIG");
            assert!(err.to_string().contains("chmod 600"), "{err}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Users::load(&path).unwrap().len(), 1);
        let err = Users::load(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().contains("cannot read"), "{err}");
    }
}
