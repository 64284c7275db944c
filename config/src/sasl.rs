//! The `sasl.*` settings of a broker's SASL listeners (`SASL_PLAINTEXT`,
//! `SASL_SSL`), under Kafka's names:
//!
//! | key | what |
//! |---|---|
//! | `sasl.enabled.mechanisms` | the mechanisms offered: `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` (default: all three) |
//! | `sasl.server.max.receive.size` | the largest frame a client may send before it is authenticated (default 524288, as Kafka) |
//! | `connections.max.reauth.ms` | 0 only: re-authentication (KIP-368) is not built |
//!
//! Users and their SCRAM credentials are kept by the broker (the embedded
//! metadata), set with AlterUserScramCredentials (`ferrite users`); PLAIN
//! checks a password against the same credentials, so no JAAS file lists
//! passwords. Refused with the reason: GSSAPI and OAUTHBEARER (not built),
//! a JAAS configuration (`sasl.jaas.config`, `listener.name.…`), and
//! re-authentication.

use ferrite_security::Mechanism;

use crate::{invalid, ConfigError};

/// Kafka's default for `sasl.server.max.receive.size`.
pub const RECEIVE_BYTES_DEFAULT: usize = 512 * 1024;
/// The most it may be set to: a client not yet authenticated gets no more.
pub const RECEIVE_BYTES_MAX: usize = 16 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslSettings {
    pub mechanisms: Vec<Mechanism>,
    pub receive_bytes_max: usize,
}

impl Default for SaslSettings {
    fn default() -> SaslSettings {
        SaslSettings {
            mechanisms: Mechanism::ALL.to_vec(),
            receive_bytes_max: RECEIVE_BYTES_DEFAULT,
        }
    }
}

impl SaslSettings {
    /// Takes one SASL key; `false` if `key` is not one of them.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        match key {
            "sasl.enabled.mechanisms" => self.mechanisms = mechanisms(key, value)?,
            "sasl.server.max.receive.size" => {
                let n: usize = v.parse().map_err(|_| invalid(key, value, "expected a byte count"))?;
                if !(1024..=RECEIVE_BYTES_MAX).contains(&n) {
                    return Err(invalid(key, value, format!("1024 to {RECEIVE_BYTES_MAX} bytes")));
                }
                self.receive_bytes_max = n;
            }
            "connections.max.reauth.ms" if v != "0" => {
                return Err(invalid(
                    key,
                    value,
                    "re-authentication (KIP-368) is not built yet: leave it 0",
                ))
            }
            "connections.max.reauth.ms" | "sasl.mechanism.inter.broker.protocol" => {}
            "sasl.jaas.config" => {
                return Err(invalid(
                    key,
                    "(hidden)",
                    "no JAAS file is read: users are the broker's SCRAM credentials (ferrite users add)",
                ))
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn mechanisms(key: &str, value: &str) -> Result<Vec<Mechanism>, ConfigError> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let m = match Mechanism::parse(&name.to_ascii_uppercase()) {
            Some(m) => m,
            None if matches!(name, "GSSAPI" | "OAUTHBEARER") => {
                return Err(invalid(
                    key,
                    value,
                    format!("{name} is not built: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are"),
                ))
            }
            None => {
                return Err(invalid(
                    key,
                    value,
                    format!("{name}: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                ))
            }
        };
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err(invalid(key, value, "names no mechanism"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_are_kafkas_names_and_what_is_not_built_is_refused() {
        let mut s = SaslSettings::default();
        assert!(s.set("sasl.enabled.mechanisms", "SCRAM-SHA-512, PLAIN").unwrap());
        assert_eq!(s.mechanisms, [Mechanism::ScramSha512, Mechanism::Plain]);
        let refused = |k: &str, v: &str, why: &str| {
            let e = SaslSettings::default().set(k, v).unwrap_err().to_string();
            assert!(e.contains(why), "{k}={v}: {e}");
        };
        refused("sasl.enabled.mechanisms", "GSSAPI", "not built");
        refused("sasl.enabled.mechanisms", "SCRAM-SHA-1", "expected PLAIN");
        refused("sasl.server.max.receive.size", "100", "1024 to");
        refused("connections.max.reauth.ms", "3600000", "not built yet");
        refused("sasl.jaas.config", "org.apache.kafka...", "no JAAS file");
        assert!(SaslSettings::default().set("connections.max.reauth.ms", "0").unwrap());
        assert!(!SaslSettings::default().set("ssl.client.auth", "none").unwrap());
    }
}
