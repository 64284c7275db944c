//! The `ssl.*` settings of a broker's SSL listeners, as Kafka names them,
//! for PEM key material (Kafka's `ssl.keystore.type=PEM`, KIP-651):
//!
//! | key | what |
//! |---|---|
//! | `ssl.keystore.type`, `ssl.truststore.type` | `PEM` (the only type read; convert JKS or PKCS12 first) |
//! | `ssl.keystore.location` | a file holding the private key (PKCS#8, PKCS#1 or SEC1, unencrypted) and the certificate chain, leaf first |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` | the same, given inline (both, instead of a location) |
//! | `ssl.truststore.location`, `ssl.truststore.certificates` | the CA certificates client certificates are checked against (a file, or inline) |
//! | `ssl.client.auth` | `none` (default), `requested` (a certificate is checked if sent) or `required` |
//! | `ssl.enabled.protocols` | `TLSv1.2,TLSv1.3` (default), or either alone |
//!
//! Refused with the reason, rather than ignored: other keystore types,
//! encrypted keys (`ssl.key.password`), store passwords with PEM (as Kafka
//! refuses them), TLS versions before 1.2, `ssl.cipher.suites` (the TLS
//! library's AEAD suites are used), and listener-prefixed settings
//! (`listener.name.<name>.ssl.*`), which are not read yet: an operator who
//! asks for client authentication on one listener must not get a broker
//! that silently skips it.
//!
//! Only the settings are kept here; the files are read when the broker
//! starts (`broker/src/net/tls_setup.rs`) and the keys and certificates
//! parsed there by `ferrite-transport`'s `tls.rs`, so that a bad file stops
//! the start with its path named.

use std::path::PathBuf;

use crate::{invalid, ConfigError};

/// Where PEM text comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    Inline(String),
}

/// The broker's own key and certificate chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keystore {
    /// One file with the key and the chain.
    File(PathBuf),
    /// `ssl.keystore.certificate.chain` and `ssl.keystore.key`.
    Inline { chain: String, key: String },
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClientAuth {
    #[default]
    None,
    Requested,
    Required,
}

/// A TLS version of `ssl.enabled.protocols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// The SSL settings as given; [`SslSettings::checked`] says whether an SSL
/// listener can be served with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SslSettings {
    keystore_location: Option<PathBuf>,
    keystore_chain: Option<String>,
    keystore_key: Option<String>,
    pub truststore: Option<Pem>,
    pub client_auth: ClientAuth,
    pub enabled_protocols: Vec<TlsVersion>,
    /// Settings given that an SSL listener could not honour: (key, value
    /// as shown, why).
    unservable: Vec<(String, String, &'static str)>,
}

const ONLY_PEM: &str =
    "only PEM is read: convert the store (openssl pkcs12 -nodes, or keytool -importkeystore then openssl)";
const ENCRYPTED_KEY: &str =
    "encrypted private keys are not read yet: give the key unencrypted (openssl pkcs8 -nocrypt), readable by the \
     broker only";
const NO_STORE_PASSWORD: &str = "a PEM store has no password (as in Kafka)";
const NO_CIPHER_SUITES: &str = "not read: the broker offers AES-GCM and ChaCha20-Poly1305 suites only; leave it unset";

impl Default for SslSettings {
    fn default() -> SslSettings {
        SslSettings {
            keystore_location: None,
            keystore_chain: None,
            keystore_key: None,
            truststore: None,
            client_auth: ClientAuth::None,
            enabled_protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            unservable: Vec::new(),
        }
    }
}

impl SslSettings {
    /// Takes one `ssl.*` key (or refuses a listener-prefixed one); `false`
    /// if `key` is not one of them.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        if key.starts_with("listener.name.") {
            return Err(invalid(
                key,
                "(hidden)",
                "listener-prefixed settings are not read yet: give the ssl.* or sasl.* key unprefixed (it applies to \
                 every listener of its kind)",
            ));
        }
        let v = value.trim();
        match key {
            "ssl.keystore.location" => self.keystore_location = Some(PathBuf::from(v)),
            "ssl.keystore.certificate.chain" => self.keystore_chain = Some(v.to_string()),
            "ssl.keystore.key" => self.keystore_key = Some(v.to_string()),
            "ssl.truststore.location" => self.truststore = Some(Pem::File(PathBuf::from(v))),
            "ssl.truststore.certificates" => self.truststore = Some(Pem::Inline(v.to_string())),
            "ssl.client.auth" => self.client_auth = client_auth(key, value)?,
            "ssl.enabled.protocols" => self.enabled_protocols = protocols(key, value)?,
            // Settings a served SSL listener could not honour: refused
            // then (`checked`), not on a broker without one (a Kafka
            // template often carries them).
            "ssl.keystore.type" | "ssl.truststore.type" if !v.eq_ignore_ascii_case("PEM") => {
                self.unservable.push((key.to_string(), v.to_string(), ONLY_PEM));
            }
            "ssl.key.password" if !v.is_empty() => {
                self.unservable
                    .push((key.to_string(), "(hidden)".into(), ENCRYPTED_KEY));
            }
            "ssl.keystore.password" | "ssl.truststore.password" if !v.is_empty() => {
                self.unservable
                    .push((key.to_string(), "(hidden)".into(), NO_STORE_PASSWORD));
            }
            "ssl.cipher.suites" if !v.is_empty() => {
                self.unservable.push((key.to_string(), v.to_string(), NO_CIPHER_SUITES));
            }
            // Settings of a client's side, or of what the defaults already
            // are: nothing to do on a broker's listener.
            "ssl.keystore.type"
            | "ssl.truststore.type"
            | "ssl.key.password"
            | "ssl.keystore.password"
            | "ssl.truststore.password"
            | "ssl.cipher.suites"
            | "ssl.protocol"
            | "ssl.endpoint.identification.algorithm" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The keystore given, or why an SSL listener cannot be served: a
    /// setting it could not honour, no keystore, half of an inline one, or
    /// both a file and an inline one; client authentication with nothing to
    /// check certificates against.
    pub fn checked(&self) -> Result<Keystore, ConfigError> {
        if let Some((key, value, why)) = self.unservable.first() {
            return Err(invalid(key, value, *why));
        }
        let keystore = match (&self.keystore_location, &self.keystore_chain, &self.keystore_key) {
            (Some(path), None, None) => Keystore::File(path.clone()),
            (None, Some(chain), Some(key)) => Keystore::Inline {
                chain: chain.clone(),
                key: key.clone(),
            },
            (None, None, None) => {
                return Err(invalid(
                    "ssl.keystore.location",
                    "",
                    "an SSL listener needs its key and certificate: ssl.keystore.location (one PEM file), or \
                     ssl.keystore.certificate.chain and ssl.keystore.key",
                ))
            }
            (Some(_), _, _) => {
                return Err(invalid(
                    "ssl.keystore.location",
                    "",
                    "give either ssl.keystore.location or the inline chain and key, not both",
                ))
            }
            (None, _, _) => {
                return Err(invalid(
                    "ssl.keystore.certificate.chain",
                    "",
                    "an inline keystore needs both ssl.keystore.certificate.chain and ssl.keystore.key",
                ))
            }
        };
        if self.client_auth != ClientAuth::None && self.truststore.is_none() {
            return Err(invalid(
                "ssl.client.auth",
                match self.client_auth {
                    ClientAuth::Required => "required",
                    _ => "requested",
                },
                "client certificates need a truststore: ssl.truststore.location or ssl.truststore.certificates",
            ));
        }
        Ok(keystore)
    }
}

fn client_auth(key: &str, value: &str) -> Result<ClientAuth, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "none" => Ok(ClientAuth::None),
        "requested" => Ok(ClientAuth::Requested),
        "required" => Ok(ClientAuth::Required),
        _ => Err(invalid(key, value, "expected required, requested or none")),
    }
}

fn protocols(key: &str, value: &str) -> Result<Vec<TlsVersion>, ConfigError> {
    let mut out = Vec::new();
    for p in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let v = match p {
            "TLSv1.2" => TlsVersion::Tls12,
            "TLSv1.3" => TlsVersion::Tls13,
            "TLSv1" | "TLSv1.1" | "SSLv3" => {
                return Err(invalid(
                    key,
                    value,
                    format!("{p} is not offered: TLSv1.2 and TLSv1.3 are"),
                ))
            }
            _ => return Err(invalid(key, value, format!("{p}: expected TLSv1.2 or TLSv1.3"))),
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err(invalid(key, value, "names no protocol"));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<SslSettings, String> {
        let mut s = SslSettings::default();
        for (k, v) in pairs {
            assert!(s.set(k, v).map_err(|e| e.to_string())?, "{k} is an ssl key");
        }
        Ok(s)
    }

    #[test]
    fn a_keystore_is_one_file_or_an_inline_chain_and_key() {
        let file = settings(&[("ssl.keystore.type", "pem"), ("ssl.keystore.location", "/etc/k.pem")]).unwrap();
        assert_eq!(file.checked().unwrap(), Keystore::File("/etc/k.pem".into()));
        let inline = settings(&[
            ("ssl.keystore.certificate.chain", "-----BEGIN CERTIFICATE-----"),
            ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
        ])
        .unwrap();
        assert!(matches!(inline.checked().unwrap(), Keystore::Inline { .. }));
        let why = |s: SslSettings| s.checked().unwrap_err().to_string();
        assert!(why(SslSettings::default()).contains("needs its key and certificate"));
        assert!(why(settings(&[("ssl.keystore.key", "k")]).unwrap()).contains("needs both"));
        assert!(
            why(settings(&[("ssl.keystore.location", "/k"), ("ssl.keystore.key", "k")]).unwrap()).contains("not both")
        );
        let auth = settings(&[("ssl.keystore.location", "/k"), ("ssl.client.auth", "required")]).unwrap();
        assert!(why(auth).contains("need a truststore"));
    }

    #[test]
    fn what_would_be_silently_skipped_is_refused() {
        let refused = |k: &str, v: &str, why: &str| {
            let e = match settings(&[(k, v), ("ssl.keystore.location", "/k.pem")]) {
                Err(e) => e,
                Ok(s) => s.checked().expect_err(k).to_string(),
            };
            assert!(e.contains(why), "{k}: {e}");
            assert!(!e.contains("secret"), "{k}: a password is not repeated: {e}");
        };
        refused("ssl.keystore.type", "JKS", "only PEM");
        refused("ssl.truststore.type", "PKCS12", "only PEM");
        refused("ssl.key.password", "secret", "encrypted private keys");
        refused("ssl.keystore.password", "secret", "no password");
        refused("ssl.enabled.protocols", "TLSv1.1,TLSv1.2", "TLSv1.1 is not offered");
        refused("ssl.client.auth", "always", "expected required");
        refused("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "leave it unset");
        refused("listener.name.ssl.ssl.client.auth", "required", "not read yet");
        refused(
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
            "secret",
            "not read yet",
        );
        let s = settings(&[("ssl.enabled.protocols", "TLSv1.3, TLSv1.2"), ("ssl.key.password", "")]).unwrap();
        assert_eq!(s.enabled_protocols, [TlsVersion::Tls12, TlsVersion::Tls13]);
        assert!(!SslSettings::default().set("sasl.enabled.mechanisms", "PLAIN").unwrap());
        let template = settings(&[("ssl.keystore.type", "JKS"), ("ssl.keystore.password", "secret")]);
        assert!(template.is_ok(), "taken while no SSL listener is served");
    }
}
