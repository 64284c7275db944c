//! Certificates for TLS tests, made fresh by each test run (rcgen, ECDSA
//! P-256), never committed: a CA, a broker certificate for `localhost` and
//! `127.0.0.1` signed by it, client certificates signed by it, and a
//! second, unrelated CA with a client certificate of its own (one the
//! broker must refuse).

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

/// A CA: its certificate (PEM) and what it signs with.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A leaf certificate for `names` (host names or IP addresses), with
    /// `common_name` as its subject, for a server or a client: (chain PEM,
    /// key PEM).
    pub fn issue(&self, common_name: &str, names: &[&str], usage: Usage) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.cert, &self.key).expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }
}

/// What a leaf certificate is for.
#[derive(Clone, Copy, Debug)]
pub enum Usage {
    Server,
    Client,
}

/// PEM files for a broker with an SSL listener and its clients, written
/// into a directory.
pub struct TlsFiles {
    /// The CA that signed the broker's and the good client's certificates.
    pub ca: PathBuf,
    /// The broker's key and chain, in one file (`ssl.keystore.location`).
    pub keystore: PathBuf,
    /// A client signed by `ca`: certificate and key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A client signed by another CA.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

impl TlsFiles {
    pub fn write(dir: &Path) -> TlsFiles {
        let ca = Ca::new("ferrite test CA");
        let (chain, key) = ca.issue("localhost", &["localhost", "127.0.0.1"], Usage::Server);
        let (client, client_key) = ca.issue("test-client", &[], Usage::Client);
        let other = Ca::new("another CA");
        let (stranger, stranger_key) = other.issue("stranger", &[], Usage::Client);
        let put = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write a PEM file");
            path
        };
        TlsFiles {
            ca: put("ca.pem", &ca.pem()),
            keystore: put("broker.pem", &format!("{key}{chain}")),
            client_cert: put("client.pem", &client),
            client_key: put("client.key", &client_key),
            stranger_cert: put("stranger.pem", &stranger),
            stranger_key: put("stranger.key", &stranger_key),
        }
    }
}
