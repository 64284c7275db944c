//! PLAIN (RFC 4616): one message, `[authzid] NUL authcid NUL password`,
//! checked against the user's SCRAM credential (Kafka keeps PLAIN's users
//! in a JAAS file; one salted store for both mechanisms means a password
//! is never kept in the clear). PLAIN sends the password itself, so it
//! belongs on an SSL listener (`SASL_SSL`).

use crate::credential::ScramCredential;
use crate::mechanism::Mechanism;
use crate::SecurityError;

/// A field of the message, at most (RFC 4616 allows 255 characters of
/// each; some clients send longer passwords, this still bounds the work).
pub const FIELD_BYTES_MAX: usize = 1024;

/// PBKDF2 iterations spent on a user that does not exist (`ferrite users`'
/// default for the ones that do).
const DUMMY_ITERATIONS: u32 = 8192;

/// The user a PLAIN message authenticates, or why not. `lookup` gives the
/// user's credential for a SCRAM mechanism.
pub fn authenticate(
    message: &[u8],
    lookup: &dyn Fn(&str, Mechanism) -> Option<ScramCredential>,
) -> Result<String, SecurityError> {
    let malformed = |reason: &str| SecurityError::Malformed {
        mechanism: "PLAIN",
        reason: reason.into(),
    };
    let mut fields = message.split(|b| *b == 0);
    let (authzid, user, password) = match (fields.next(), fields.next(), fields.next(), fields.next()) {
        (Some(a), Some(u), Some(p), None) => (a, u, p),
        _ => return Err(malformed("expected [authzid] NUL user NUL password")),
    };
    if [authzid, user, password].iter().any(|f| f.len() > FIELD_BYTES_MAX) {
        return Err(malformed("a field is too long"));
    }
    let user = std::str::from_utf8(user).map_err(|_| malformed("the user is not UTF-8"))?;
    if user.is_empty() || password.is_empty() {
        return Err(malformed("an empty user or password"));
    }
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(SecurityError::auth("an authorization id other than the user"));
    }
    let checked = [Mechanism::ScramSha512, Mechanism::ScramSha256]
        .into_iter()
        .find_map(|m| lookup(user, m).map(|c| c.checks_password(m, password)));
    match checked {
        Some(true) => Ok(user.to_string()),
        Some(false) => Err(SecurityError::auth("wrong password")),
        None => {
            // As long as a known user's check takes: the time to answer
            // must not tell which users exist.
            let _ = ScramCredential::from_password(Mechanism::ScramSha512, password, b"no such user", DUMMY_ITERATIONS);
            Err(SecurityError::auth("no such user"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_checked_against_the_salted_credential() {
        let cred = ScramCredential::from_password(Mechanism::ScramSha256, b"alice-secret", b"salt", 4096).unwrap();
        let lookup = |u: &str, m: Mechanism| (u == "alice" && m == Mechanism::ScramSha256).then(|| cred.clone());
        assert_eq!(authenticate(b"\0alice\0alice-secret", &lookup), Ok("alice".into()));
        assert_eq!(authenticate(b"alice\0alice\0alice-secret", &lookup), Ok("alice".into()));
        let refused = |m: &[u8]| authenticate(m, &lookup).unwrap_err();
        assert!(matches!(
            refused(b"\0alice\0wrong"),
            SecurityError::Authentication { .. }
        ));
        assert!(matches!(
            refused(b"\0bob\0alice-secret"),
            SecurityError::Authentication { .. }
        ));
        assert!(matches!(
            refused(b"admin\0alice\0alice-secret"),
            SecurityError::Authentication { .. }
        ));
        assert!(matches!(
            refused(b"alice\0alice-secret"),
            SecurityError::Malformed { .. }
        ));
        assert!(matches!(refused(b"\0alice\0a\0b"), SecurityError::Malformed { .. }));
        assert!(matches!(refused(&[0u8; 3000]), SecurityError::Malformed { .. }));
    }
}
