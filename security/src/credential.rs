//! A SCRAM credential as Kafka stores it (ZooKeeper `/config/users/<user>`,
//! one entry per mechanism; here also the standalone broker's metadata):
//!
//! ```text
//! salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>
//! ```
//!
//! with RFC 5802's keys: `SaltedPassword = Hi(password, salt, i)` (PBKDF2
//! with the mechanism's HMAC, one block), `StoredKey = H(HMAC(SaltedPassword,
//! "Client Key"))`, `ServerKey = HMAC(SaltedPassword, "Server Key")`. The
//! password itself is never kept: the stored key checks a client's proof,
//! the server key signs the server's final message. Base64 is the standard
//! alphabet with padding, as Java's `Base64.getEncoder()` writes it.
//!
//! Iterations are 4096 to 16384 (Kafka's bounds for
//! AlterUserScramCredentials): fewer makes an offline guess cheap, more
//! makes every login, and a PLAIN one most of all, slow.

use base64::Engine;
use ring::{digest, hmac, pbkdf2};

use crate::mechanism::Mechanism;
use crate::SecurityError;

pub const ITERATIONS_MIN: u32 = 4096;
pub const ITERATIONS_MAX: u32 = 16384;
/// A salt, at most (Kafka's clients send 32 or 64 bytes).
pub const SALT_BYTES_MAX: usize = 1024;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// One user's credential for one SCRAM mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

/// A SCRAM mechanism's primitives.
pub(crate) struct Hash {
    pub digest: &'static digest::Algorithm,
    pub hmac: hmac::Algorithm,
    pub pbkdf2: pbkdf2::Algorithm,
}

pub(crate) fn hash_of(m: Mechanism) -> Option<Hash> {
    match m {
        Mechanism::Plain => None,
        Mechanism::ScramSha256 => Some(Hash {
            digest: &digest::SHA256,
            hmac: hmac::HMAC_SHA256,
            pbkdf2: pbkdf2::PBKDF2_HMAC_SHA256,
        }),
        Mechanism::ScramSha512 => Some(Hash {
            digest: &digest::SHA512,
            hmac: hmac::HMAC_SHA512,
            pbkdf2: pbkdf2::PBKDF2_HMAC_SHA512,
        }),
    }
}

pub(crate) fn hmac(alg: hmac::Algorithm, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(alg, key), data).as_ref().to_vec()
}

/// Equal, in time that does not depend on where they differ.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bad(reason: impl Into<String>) -> SecurityError {
    SecurityError::BadCredential { reason: reason.into() }
}

impl ScramCredential {
    /// `Hi(password, salt, iterations)` for `mechanism`.
    pub fn salted_password(
        mechanism: Mechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<Vec<u8>, SecurityError> {
        let hash = hash_of(mechanism).ok_or_else(|| bad("PLAIN has no SCRAM credential"))?;
        let rounds = std::num::NonZeroU32::new(iterations).ok_or_else(|| bad("0 iterations"))?;
        let mut out = vec![0u8; hash.digest.output_len()];
        pbkdf2::derive(hash.pbkdf2, rounds, salt, password, &mut out);
        Ok(out)
    }

    /// The credential of a salted password (what AlterUserScramCredentials
    /// carries: clients salt the password themselves).
    pub fn from_salted_password(
        mechanism: Mechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, SecurityError> {
        let hash = hash_of(mechanism).ok_or_else(|| bad("PLAIN has no SCRAM credential"))?;
        check_bounds(salt, iterations)?;
        if salted_password.len() != hash.digest.output_len() {
            return Err(bad(format!(
                "a {} salted password is {} bytes, not {}",
                mechanism.name(),
                hash.digest.output_len(),
                salted_password.len()
            )));
        }
        let client_key = hmac(hash.hmac, salted_password, b"Client Key");
        Ok(ScramCredential {
            salt: salt.to_vec(),
            stored_key: digest::digest(hash.digest, &client_key).as_ref().to_vec(),
            server_key: hmac(hash.hmac, salted_password, b"Server Key"),
            iterations,
        })
    }

    pub fn from_password(
        mechanism: Mechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, SecurityError> {
        check_bounds(salt, iterations)?;
        let salted = Self::salted_password(mechanism, password, salt, iterations)?;
        Self::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// Whether `password` is the one this credential was made from.
    pub fn checks_password(&self, mechanism: Mechanism, password: &[u8]) -> bool {
        match Self::from_password(mechanism, password, &self.salt, self.iterations) {
            Ok(c) => same(&c.stored_key, &self.stored_key),
            Err(_) => false,
        }
    }

    /// Reads Kafka's stored form.
    pub fn parse(text: &str) -> Result<ScramCredential, SecurityError> {
        let (mut salt, mut stored, mut server, mut iterations) = (None, None, None, None);
        for field in text.split(',') {
            let (k, v) = field
                .split_once('=')
                .ok_or_else(|| bad(format!("'{field}' is not key=value")))?;
            let b64 = || B64.decode(v).map_err(|e| bad(format!("{k}: {e}")));
            match k {
                "salt" => salt = Some(b64()?),
                "stored_key" => stored = Some(b64()?),
                "server_key" => server = Some(b64()?),
                "iterations" => iterations = Some(v.parse::<u32>().map_err(|e| bad(format!("iterations: {e}")))?),
                _ => return Err(bad(format!("unknown field {k}"))),
            }
        }
        let missing = |what| bad(format!("no {what}"));
        Ok(ScramCredential {
            salt: salt.ok_or_else(|| missing("salt"))?,
            stored_key: stored.ok_or_else(|| missing("stored_key"))?,
            server_key: server.ok_or_else(|| missing("server_key"))?,
            iterations: iterations.ok_or_else(|| missing("iterations"))?,
        })
    }
}

impl std::fmt::Display for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "salt={},stored_key={},server_key={},iterations={}",
            B64.encode(&self.salt),
            B64.encode(&self.stored_key),
            B64.encode(&self.server_key),
            self.iterations
        )
    }
}

fn check_bounds(salt: &[u8], iterations: u32) -> Result<(), SecurityError> {
    if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
        return Err(bad(format!(
            "{iterations} iterations: {ITERATIONS_MIN} to {ITERATIONS_MAX} are taken"
        )));
    }
    if salt.is_empty() || salt.len() > SALT_BYTES_MAX {
        return Err(bad(format!("a salt of {} bytes: 1 to {SALT_BYTES_MAX}", salt.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example: user "user", password "pencil", the salt
    /// below, 4096 iterations; its server signature checks out only with
    /// the right keys (see `scram.rs`). Here: the stored form round-trips
    /// and a password checks against it.
    #[test]
    fn the_stored_form_round_trips_and_checks_the_password() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        for m in [Mechanism::ScramSha256, Mechanism::ScramSha512] {
            let c = ScramCredential::from_password(m, b"pencil", &salt, 4096).unwrap();
            let text = c.to_string();
            assert!(text.starts_with("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key="), "{text}");
            assert_eq!(ScramCredential::parse(&text).unwrap(), c);
            assert!(c.checks_password(m, b"pencil"));
            assert!(!c.checks_password(m, b"pencil "));
        }
    }

    #[test]
    fn credentials_out_of_bounds_are_refused() {
        let salted = vec![0u8; 32];
        let err = |r: Result<ScramCredential, SecurityError>| r.unwrap_err().to_string();
        assert!(err(ScramCredential::from_salted_password(
            Mechanism::ScramSha256,
            b"s",
            &salted,
            4095
        ))
        .contains("4096 to 16384"));
        assert!(err(ScramCredential::from_salted_password(
            Mechanism::ScramSha256,
            b"",
            &salted,
            4096
        ))
        .contains("salt"));
        assert!(err(ScramCredential::from_salted_password(
            Mechanism::ScramSha512,
            b"s",
            &salted,
            4096
        ))
        .contains("64"));
        assert!(ScramCredential::parse("salt=AA==,stored_key=AA==").is_err());
        assert!(ScramCredential::parse("salt=!!,stored_key=AA==,server_key=AA==,iterations=4096").is_err());
    }
}
