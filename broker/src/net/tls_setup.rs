//! Each listener's TLS and SASL, made once when the broker starts from the `ssl.*`
//! settings (`ferrite_config::ssl`): the keystore and truststore files are
//! read here, so that a missing or unreadable file, or PEM without a key
//! or certificate, stops the start with the file named.

use ferrite_config::listeners::SecurityProtocol;
use ferrite_config::ssl::{ClientAuth, Keystore, Pem, TlsVersion};
use ferrite_config::BrokerConfig;
use ferrite_transport::tls::{self, Acceptor, ClientCertificates, ServerSettings, Version};

use super::Ear;
use crate::handlers::ListenerIndex;

/// Per listener, in [`BrokerConfig::listeners`]' order: how its
/// connections are served.
pub fn ears(config: &BrokerConfig) -> Result<Vec<Ear>, String> {
    let listeners = config.listeners();
    let encrypted = |p: SecurityProtocol| matches!(p, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl);
    let any_ssl = listeners.iter().any(|l| encrypted(l.protocol));
    let sasl = std::sync::Arc::new(config.sasl.clone());
    let acceptor = match (any_ssl, &config.keystore) {
        (false, _) => None,
        (true, Some(keystore)) => Some(acceptor(config, keystore)?),
        (true, None) => return Err("an SSL listener has no keystore (ssl.keystore.location)".into()),
    };
    Ok(listeners
        .iter()
        .enumerate()
        .map(|(i, l)| Ear {
            index: ListenerIndex(i),
            tls: match encrypted(l.protocol) {
                true => acceptor.clone(),
                false => None,
            },
            sasl: match l.protocol {
                SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => Some(sasl.clone()),
                _ => None,
            },
        })
        .collect())
}

fn acceptor(config: &BrokerConfig, keystore: &Keystore) -> Result<Acceptor, String> {
    let read =
        |key: &str, path: &std::path::Path| std::fs::read(path).map_err(|e| format!("{key} {}: {e}", path.display()));
    let (chain, key) = match keystore {
        Keystore::File(path) => {
            let pem = read("ssl.keystore.location", path)?;
            (pem.clone(), pem)
        }
        Keystore::Inline { chain, key } => (chain.clone().into_bytes(), key.clone().into_bytes()),
    };
    let trust = match &config.ssl.truststore {
        None => None,
        Some(Pem::File(path)) => Some(read("ssl.truststore.location", path)?),
        Some(Pem::Inline(text)) => Some(text.clone().into_bytes()),
    };
    let versions: Vec<Version> = config
        .ssl
        .enabled_protocols
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => Version::Tls12,
            TlsVersion::Tls13 => Version::Tls13,
        })
        .collect();
    let settings = ServerSettings {
        chain_pem: &chain,
        key_pem: &key,
        trust_pem: trust.as_deref(),
        client_certificates: match config.ssl.client_auth {
            ClientAuth::None => ClientCertificates::NotAsked,
            ClientAuth::Requested => ClientCertificates::CheckedIfSent,
            ClientAuth::Required => ClientCertificates::Required,
        },
        versions: &versions,
    };
    tls::Acceptor::new(&settings).map_err(|e| {
        let source = match keystore {
            Keystore::File(path) => format!(" (ssl.keystore.location {})", path.display()),
            Keystore::Inline { .. } => String::new(),
        };
        format!("{e}{source}")
    })
}
