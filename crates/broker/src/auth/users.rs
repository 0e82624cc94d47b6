//! The users of `--users FILE`: `name:password` lines, read once at start. Only the SCRAM
//! credentials derived from each password (random salt, 4096 iterations) are kept.

use std::collections::HashMap;
use std::path::Path;

use super::scram::{ScramCredential, ScramHash, ITERATIONS};
use crate::error::BrokerError;

/// The salt's length in bytes.
const SALT_BYTES: usize = 32;

/// Every user's SCRAM credentials.
#[derive(Debug, Default)]
pub(crate) struct Users(HashMap<String, [ScramCredential; 2]>);

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
            let credentials = [
                derive(ScramHash::Sha256, salt()?),
                derive(ScramHash::Sha512, salt()?),
            ];
            users.insert(name.to_string(), credentials);
        }
        Ok(Users(users))
    }

    /// How many users there are.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// `user`'s credential for `hash`.
    pub(crate) fn scram(&self, user: &str, hash: ScramHash) -> Option<ScramCredential> {
        self.0
            .get(user)
            .and_then(|c| c.iter().find(|c| c.hash == hash))
            .cloned()
    }

    /// Whether `password` is `user`'s (PLAIN), checked against the SHA-256 credential.
    pub(crate) fn check_password(&self, user: &str, password: &str) -> bool {
        self.scram(user, ScramHash::Sha256)
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
