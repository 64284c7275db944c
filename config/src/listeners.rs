//! The listener settings as Kafka reads them — `listeners`,
//! `advertised.listeners`, `listener.security.protocol.map`,
//! `inter.broker.listener.name`, `security.inter.broker.protocol` — and
//! what Ferrite serves of them today: one listener, PLAINTEXT.
//!
//! A listener is `NAME://host:port`; its security protocol is what the
//! map gives its name, or the name itself when that is a protocol's
//! (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`). Until TLS and SASL
//! are built (issue #21), a listener whose protocol is not PLAINTEXT, and
//! a second listener, are refused when the broker starts: serving an
//! `SSL://` port in plaintext, or a second port not at all, would be the
//! silent surprise.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::ConfigError;

/// A listener's security protocol (Kafka's `SecurityProtocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// One `NAME://host:port` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Upper-cased, as Kafka compares listener names.
    pub name: String,
    /// Empty: every interface (as `0.0.0.0`).
    pub host: String,
    pub port: u16,
}

/// The listener settings as given; [`Listeners::served`] says what the
/// broker serves of them.
#[derive(Clone, Debug, Default)]
pub struct Listeners {
    pub listeners: Option<Vec<Endpoint>>,
    pub advertised: Option<Vec<Endpoint>>,
    pub protocol_map: Option<BTreeMap<String, SecurityProtocol>>,
    pub inter_broker_name: Option<String>,
    pub inter_broker_protocol: Option<SecurityProtocol>,
}

/// The one listener a broker serves: where it binds, and what it tells
/// clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub listen_host: String,
    pub listen_port: u16,
    pub advertised_host: String,
    pub advertised_port: u16,
}

impl Listeners {
    /// Takes one of the listener keys; `false` if `key` is not one.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "listeners" => self.listeners = Some(endpoints(key, value)?),
            "advertised.listeners" => self.advertised = Some(endpoints(key, value)?),
            "listener.security.protocol.map" => self.protocol_map = Some(protocol_map(key, value)?),
            "inter.broker.listener.name" => self.inter_broker_name = Some(value.trim().to_ascii_uppercase()),
            "security.inter.broker.protocol" => {
                let p = SecurityProtocol::parse(value.trim().to_ascii_uppercase().as_str())
                    .ok_or_else(|| invalid(key, value, "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"))?;
                self.inter_broker_protocol = Some(p);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The listener the broker serves, or why it cannot serve these
    /// settings; `None` when none of them was given. Without `listeners`,
    /// the broker listens on `current` (`ferrite standalone --listen`), a
    /// PLAINTEXT listener that the other settings apply to.
    pub fn served(&self, current: SocketAddr) -> Result<Option<Served>, ConfigError> {
        let given = self.listeners.is_some()
            || self.advertised.is_some()
            || self.protocol_map.is_some()
            || self.inter_broker_name.is_some()
            || self.inter_broker_protocol.is_some();
        if !given {
            return Ok(None);
        }
        let implied = [Endpoint {
            name: "PLAINTEXT".to_string(),
            host: current.ip().to_string(),
            port: current.port(),
        }];
        let listeners = self.listeners.as_deref().unwrap_or(&implied);
        let key = "listeners";
        let [only] = listeners else {
            let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
            return Err(invalid(
                key,
                &names.join(","),
                "Ferrite serves one listener; more (and TLS and SASL) come with issue #21",
            ));
        };
        let protocol = self.protocol_of(&only.name)?;
        if protocol != SecurityProtocol::Plaintext {
            return Err(invalid(
                key,
                &format!("{}://{}:{}", only.name, only.host, only.port),
                format!(
                    "security protocol {} is not built yet (issue #21); only PLAINTEXT listeners are served",
                    protocol.name()
                ),
            ));
        }
        self.check_inter_broker(only)?;
        let listen_host = if only.host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            only.host.clone()
        };
        let advertised = self
            .advertised
            .as_ref()
            .map(|a| self.advertised_for(a, only))
            .transpose()?;
        let (advertised_host, advertised_port) = match advertised {
            Some(a) => (a.host.clone(), a.port),
            None => (advertise(&listen_host), only.port),
        };
        Ok(Some(Served {
            listen_host,
            listen_port: only.port,
            advertised_host,
            advertised_port,
        }))
    }

    fn protocol_of(&self, name: &str) -> Result<SecurityProtocol, ConfigError> {
        if let Some(p) = self.protocol_map.as_ref().and_then(|m| m.get(name)) {
            return Ok(*p);
        }
        SecurityProtocol::parse(name).ok_or_else(|| {
            invalid(
                "listener.security.protocol.map",
                name,
                format!("listener {name} has no security protocol: map it, e.g. {name}:PLAINTEXT"),
            )
        })
    }

    /// The advertised entry of the served listener. As in Kafka, every
    /// advertised name must be a listener's: an entry of another name
    /// would send clients to a port that is not served as it says.
    fn advertised_for<'a>(&self, advertised: &'a [Endpoint], served: &Endpoint) -> Result<&'a Endpoint, ConfigError> {
        let key = "advertised.listeners";
        if let Some(other) = advertised.iter().find(|a| a.name != served.name) {
            return Err(invalid(
                key,
                &other.name,
                format!("not a listener of this broker (it has {})", served.name),
            ));
        }
        let entry = advertised
            .iter()
            .find(|a| a.name == served.name)
            .ok_or_else(|| invalid(key, &served.name, "names no entry for the listener"))?;
        if entry.host.is_empty() {
            return Err(invalid(
                key,
                &served.name,
                "the host is empty: give a host name or address",
            ));
        }
        if entry
            .host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified())
        {
            return Err(invalid(
                key,
                &entry.host,
                "a client cannot connect to a wildcard address: give a host name or address",
            ));
        }
        Ok(entry)
    }

    fn check_inter_broker(&self, served: &Endpoint) -> Result<(), ConfigError> {
        if let Some(name) = &self.inter_broker_name {
            if *name != served.name {
                return Err(invalid(
                    "inter.broker.listener.name",
                    name,
                    format!("not a listener of this broker (it has {})", served.name),
                ));
            }
        }
        match self.inter_broker_protocol {
            Some(p) if p != SecurityProtocol::Plaintext => Err(invalid(
                "security.inter.broker.protocol",
                p.name(),
                "only PLAINTEXT is built yet (issue #21)",
            )),
            _ => Ok(()),
        }
    }
}

/// What to tell clients for a listener bound to `host`: an address they
/// can connect to (`0.0.0.0` or `::` is every interface: this host).
pub fn advertise(host: &str) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        _ => host.to_string(),
    }
}

/// `NAME://host:port[,…]` (a bare `host:port` is `PLAINTEXT`); names unique.
fn endpoints(key: &str, value: &str) -> Result<Vec<Endpoint>, ConfigError> {
    let mut out: Vec<Endpoint> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, hostport) = entry.split_once("://").unwrap_or(("PLAINTEXT", entry));
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| invalid(key, value, "expected NAME://host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| invalid(key, value, "the port is not a number"))?;
        let name = name.to_ascii_uppercase();
        if out.iter().any(|e| e.name == name) {
            return Err(invalid(key, value, format!("listener {name} is named twice")));
        }
        let host = host.trim_matches(['[', ']']).to_string();
        out.push(Endpoint { name, host, port });
    }
    if out.is_empty() {
        return Err(invalid(key, value, "names no listener"));
    }
    Ok(out)
}

/// `NAME:PROTOCOL[,…]`.
fn protocol_map(key: &str, value: &str) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let mut map = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| invalid(key, value, "expected NAME:PROTOCOL entries"))?;
        let protocol = SecurityProtocol::parse(protocol.trim().to_ascii_uppercase().as_str()).ok_or_else(|| {
            invalid(
                key,
                value,
                format!("{protocol}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
            )
        })?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

fn invalid(key: &str, value: &str, why: impl Into<String>) -> ConfigError {
    crate::invalid(key, value, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `ferrite standalone --listen` put the broker.
    const CURRENT: &str = "0.0.0.0:19092";

    fn served(pairs: &[(&str, &str)]) -> Result<Option<Served>, String> {
        let mut l = Listeners::default();
        for (k, v) in pairs {
            assert!(l.set(k, v).map_err(|e| e.to_string())?, "{k} is a listener key");
        }
        l.served(CURRENT.parse().unwrap()).map_err(|e| e.to_string())
    }

    fn at(listen: (&str, u16), advertised: (&str, u16)) -> Option<Served> {
        Some(Served {
            listen_host: listen.0.into(),
            listen_port: listen.1,
            advertised_host: advertised.0.into(),
            advertised_port: advertised.1,
        })
    }

    #[test]
    fn one_plaintext_listener_is_served_with_its_advertised_address() {
        assert_eq!(served(&[]), Ok(None));
        assert_eq!(
            served(&[("listeners", "PLAINTEXT://0.0.0.0:9092")]),
            Ok(at(("0.0.0.0", 9092), ("127.0.0.1", 9092)))
        );
        assert_eq!(
            served(&[("listeners", "PLAINTEXT://:9092")]),
            Ok(at(("0.0.0.0", 9092), ("127.0.0.1", 9092)))
        );
        assert_eq!(
            served(&[
                ("listeners", "PLAINTEXT://0.0.0.0:9092"),
                ("advertised.listeners", "PLAINTEXT://kafka-1.example:19092")
            ]),
            Ok(at(("0.0.0.0", 9092), ("kafka-1.example", 19092)))
        );
        assert_eq!(
            served(&[("listeners", "10.0.0.5:9092")]),
            Ok(at(("10.0.0.5", 9092), ("10.0.0.5", 9092))),
            "a bare host:port is PLAINTEXT"
        );
        assert_eq!(
            served(&[
                ("listeners", "internal://10.0.0.5:9092"),
                ("listener.security.protocol.map", "INTERNAL:PLAINTEXT,EXTERNAL:SSL"),
                ("inter.broker.listener.name", "INTERNAL"),
            ]),
            Ok(at(("10.0.0.5", 9092), ("10.0.0.5", 9092))),
            "a named listener mapped to PLAINTEXT"
        );
        assert_eq!(
            served(&[("advertised.listeners", "PLAINTEXT://kafka-1.example:9092")]),
            Ok(at(("0.0.0.0", 19092), ("kafka-1.example", 9092))),
            "advertised without listeners: the address the broker already listens on"
        );
    }

    #[test]
    fn what_ferrite_cannot_serve_is_refused_with_the_reason() {
        let refused = |pairs: &[(&str, &str)], why: &str| {
            let e = served(pairs).expect_err("refused");
            assert!(e.contains(why), "{e}");
        };
        refused(
            &[("listeners", "SSL://0.0.0.0:9093")],
            "security protocol SSL is not built yet",
        );
        refused(&[("listeners", "SASL_SSL://0.0.0.0:9093")], "SASL_SSL is not built yet");
        refused(
            &[
                ("listeners", "EXTERNAL://0.0.0.0:9093"),
                ("listener.security.protocol.map", "EXTERNAL:SASL_PLAINTEXT"),
            ],
            "SASL_PLAINTEXT is not built yet",
        );
        refused(
            &[("listeners", "PLAINTEXT://:9092,SSL://:9093")],
            "Ferrite serves one listener",
        );
        refused(
            &[("listeners", "INTERNAL://:9092")],
            "INTERNAL has no security protocol",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092"),
                ("inter.broker.listener.name", "REPLICATION"),
            ],
            "not a listener of this broker",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092"),
                ("security.inter.broker.protocol", "SSL"),
            ],
            "only PLAINTEXT",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092"),
                ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
            ],
            "wildcard address",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092"),
                ("advertised.listeners", "PLAINTEXT://[::]:9092"),
            ],
            "wildcard",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092"),
                ("advertised.listeners", "SSL://h:9093"),
            ],
            "not a listener of this broker",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092"),
                ("advertised.listeners", "PLAINTEXT://h:9092,SSL://h:9093"),
            ],
            "not a listener of this broker",
        );
        refused(&[("listeners", "PLAINTEXT://:9092,plaintext://:9093")], "named twice");
        refused(&[("listeners", "PLAINTEXT://host")], "expected NAME://host:port");
        refused(&[("listener.security.protocol.map", "A:TLS")], "expected PLAINTEXT");
        refused(&[("security.inter.broker.protocol", "SASL_SSL")], "only PLAINTEXT");
        assert!(
            served(&[("security.inter.broker.protocol", "plaintext")]).is_ok(),
            "names are case-blind"
        );
    }
}
