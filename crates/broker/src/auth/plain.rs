//! SASL/PLAIN (RFC 4616): one message, `[authzid] NUL authcid NUL passwd`.

/// A PLAIN message that could not be read. The message goes to the client.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlainError {
    /// Not three NUL-separated UTF-8 fields, or an empty user name or password.
    #[error("Authentication failed: invalid SASL/PLAIN message format")]
    Malformed,
    /// An authorization id other than the user (Kafka's rule).
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    OtherAuthorizationId,
}

/// The user name and password of a PLAIN message.
#[derive(PartialEq, Eq)]
pub(crate) struct PlainCredentials<'a> {
    pub(crate) user: &'a str,
    pub(crate) password: &'a str,
}

impl std::fmt::Debug for PlainCredentials<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Reads a PLAIN message.
pub(crate) fn parse(message: &[u8]) -> Result<PlainCredentials<'_>, PlainError> {
    let s = std::str::from_utf8(message).map_err(|_| PlainError::Malformed)?;
    let mut fields = s.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(PlainError::Malformed);
    };
    if user.is_empty() || password.is_empty() {
        return Err(PlainError::Malformed);
    }
    if !authzid.is_empty() && authzid != user {
        return Err(PlainError::OtherAuthorizationId);
    }
    Ok(PlainCredentials { user, password })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_gives_the_user_and_password() {
        let c = parse(b"\0alice\0secret").unwrap();
        assert_eq!((c.user, c.password), ("alice", "secret"));
        let c = parse(b"alice\0alice\0pa:ss").unwrap();
        assert_eq!((c.user, c.password), ("alice", "pa:ss"));
        assert!(
            !format!("{c:?}").contains("pa:ss"),
            "the password is never printed"
        );
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0alice\0",
            b"\0\0secret",
            b"\0alice\0secret\0more",
            b"\0al\xffice\0secret",
        ] {
            assert_eq!(parse(bad), Err(PlainError::Malformed), "{bad:?}");
        }
        assert_eq!(
            parse(b"bob\0alice\0secret"),
            Err(PlainError::OtherAuthorizationId)
        );
    }
}
