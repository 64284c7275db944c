//! The listener settings as Kafka reads them — `listeners`,
//! `advertised.listeners`, `listener.security.protocol.map`,
//! `inter.broker.listener.name`, `security.inter.broker.protocol` — and
//! what Ferrite serves of them today: PLAINTEXT, SSL, SASL_PLAINTEXT and
//! SASL_SSL listeners, several of them on a standalone broker; one
//! PLAINTEXT listener in a cluster.
//!
//! A listener is `NAME://host:port`; its security protocol is what the
//! map gives its name, or the name itself when that is a protocol's
//! (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`). Several listeners,
//! or a secured one, are refused in a cluster (the brokers' own
//! connections, and the other brokers' addresses per listener, are
//! PLAINTEXT-only so far, issue #21): serving a port as something other
//! than it says, or not at all, would be the silent surprise.
//!
//! The first listener served (the *primary*) is the inter-broker one:
//! `inter.broker.listener.name`, else the first listener of
//! `security.inter.broker.protocol` (PLAINTEXT by default), else, on a
//! standalone broker that has none, the first listener.

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

/// A listener the broker serves: its name and protocol, where it binds,
/// and what it tells the clients that come in on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub listen_host: String,
    pub listen_port: u16,
    pub advertised_host: String,
    pub advertised_port: u16,
}

/// A served listener with its address resolved: what the broker binds
/// and advertises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub listen: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: u16,
}

impl Served {
    /// Resolves the listen host (a name's first address is bound, once, as
    /// Kafka does).
    pub fn resolve(self) -> Result<Listener, ConfigError> {
        let (host, port) = (self.listen_host.as_str(), self.listen_port);
        let shown = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let listen = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, port),
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
                .ok()
                .and_then(|mut addrs| addrs.next())
                .ok_or_else(|| invalid("listeners", &shown, "the host name does not resolve"))?,
        };
        Ok(Listener {
            name: self.name,
            protocol: self.protocol,
            listen,
            advertised_host: self.advertised_host,
            advertised_port: self.advertised_port,
        })
    }
}

/// Whether the broker runs in a cluster (ZooKeeper) or alone: a cluster
/// serves one PLAINTEXT listener so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployment {
    Standalone,
    Cluster,
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

    /// The listeners the broker serves, the primary first, or why it
    /// cannot serve these settings; empty when none of them was given.
    /// Without `listeners`, the broker listens on `current` (`ferrite
    /// standalone --listen`), a PLAINTEXT listener that the other settings
    /// apply to.
    pub fn served(&self, current: SocketAddr, deployment: Deployment) -> Result<Vec<Served>, ConfigError> {
        let given = self.listeners.is_some()
            || self.advertised.is_some()
            || self.protocol_map.is_some()
            || self.inter_broker_name.is_some()
            || self.inter_broker_protocol.is_some();
        if !given {
            return Ok(Vec::new());
        }
        let implied = [Endpoint {
            name: "PLAINTEXT".to_string(),
            host: current.ip().to_string(),
            port: current.port(),
        }];
        let listeners = self.listeners.as_deref().unwrap_or(&implied);
        let mut served = Vec::with_capacity(listeners.len());
        for l in listeners {
            let protocol = self.protocol_of(&l.name)?;
            served.push(self.serve(l, protocol)?);
        }
        if let Some(a) = &self.advertised {
            if let Some(other) = a.iter().find(|a| !listeners.iter().any(|l| l.name == a.name)) {
                let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
                return Err(invalid(
                    "advertised.listeners",
                    &other.name,
                    format!("not a listener of this broker (it has {})", names.join(",")),
                ));
            }
        }
        for (i, a) in served.iter().enumerate() {
            if let Some(b) = served[..i].iter().find(|b| b.listen_port == a.listen_port) {
                return Err(invalid(
                    "listeners",
                    &format!("{},{}", b.name, a.name),
                    format!(
                        "two listeners on port {}: each listener needs a port of its own (one port cannot be both {} \
                         and {})",
                        a.listen_port,
                        b.protocol.name(),
                        a.protocol.name()
                    ),
                ));
            }
        }
        let primary = self.primary(&served, deployment)?;
        served.swap(0, primary);
        served[1..].sort_by_key(|s| listeners.iter().position(|l| l.name == s.name));
        if deployment == Deployment::Cluster {
            check_cluster(&served)?;
        }
        Ok(served)
    }

    /// One listener, served as `protocol`: where it binds, what it
    /// advertises (its `advertised.listeners` entry, else its own host).
    fn serve(&self, l: &Endpoint, protocol: SecurityProtocol) -> Result<Served, ConfigError> {
        let listen_host = if l.host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            l.host.clone()
        };
        let advertised = self
            .advertised
            .as_ref()
            .and_then(|a| a.iter().find(|a| a.name == l.name))
            .map(checked_advertised)
            .transpose()?;
        let (advertised_host, advertised_port) = match advertised {
            Some(a) => (a.host.clone(), a.port),
            None => (advertise(&listen_host), l.port),
        };
        Ok(Served {
            name: l.name.clone(),
            protocol,
            listen_host,
            listen_port: l.port,
            advertised_host,
            advertised_port,
        })
    }

    /// A listener's protocol: from the map when one is given (as in Kafka,
    /// a given map replaces the default one, where each protocol's name
    /// maps to itself), else the name's own.
    fn protocol_of(&self, name: &str) -> Result<SecurityProtocol, ConfigError> {
        if let Some(map) = &self.protocol_map {
            return map.get(name).copied().ok_or_else(|| {
                invalid(
                    "listener.security.protocol.map",
                    name,
                    format!("listener {name} is not in the map: add {name}:<PROTOCOL>"),
                )
            });
        }
        SecurityProtocol::parse(name).ok_or_else(|| {
            invalid(
                "listener.security.protocol.map",
                name,
                format!("listener {name} has no security protocol: map it, e.g. {name}:PLAINTEXT"),
            )
        })
    }

    /// The index in `served` of the inter-broker listener (see the module
    /// doc).
    fn primary(&self, served: &[Served], deployment: Deployment) -> Result<usize, ConfigError> {
        let names = || served.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(",");
        if let Some(name) = &self.inter_broker_name {
            return served.iter().position(|s| s.name == *name).ok_or_else(|| {
                invalid(
                    "inter.broker.listener.name",
                    name,
                    format!("not a listener of this broker (it has {})", names()),
                )
            });
        }
        let protocol = self.inter_broker_protocol.unwrap_or(SecurityProtocol::Plaintext);
        if protocol != SecurityProtocol::Plaintext && deployment == Deployment::Cluster {
            return Err(invalid(
                "security.inter.broker.protocol",
                protocol.name(),
                "only PLAINTEXT is built yet (issue #21)",
            ));
        }
        match served.iter().position(|s| s.protocol == protocol) {
            Some(i) => Ok(i),
            None if deployment == Deployment::Standalone => Ok(0),
            None => Err(invalid(
                "listeners",
                &names(),
                "a cluster needs a PLAINTEXT listener for the brokers' own connections",
            )),
        }
    }
}

/// What a cluster serves so far: its one listener, PLAINTEXT.
fn check_cluster(served: &[Served]) -> Result<(), ConfigError> {
    let names: Vec<&str> = served.iter().map(|s| s.name.as_str()).collect();
    if served.len() > 1 {
        return Err(invalid(
            "listeners",
            &names.join(","),
            "a cluster broker serves one listener so far (several come with issue #21, with every broker's \
             address per listener); a standalone broker serves several",
        ));
    }
    if served[0].protocol != SecurityProtocol::Plaintext {
        return Err(invalid(
            "listeners",
            &served[0].name,
            format!(
                "a cluster broker's listener is PLAINTEXT so far (the brokers' own connections speak no {} yet, \
                 issue #21); a standalone broker serves SSL",
                served[0].protocol.name()
            ),
        ));
    }
    Ok(())
}

/// An advertised entry a client can connect to: a host is given, and it
/// is not a wildcard.
fn checked_advertised(entry: &Endpoint) -> Result<&Endpoint, ConfigError> {
    let key = "advertised.listeners";
    if entry.host.is_empty() {
        return Err(invalid(
            key,
            &entry.name,
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

    fn served_as(pairs: &[(&str, &str)], deployment: Deployment) -> Result<Vec<Served>, String> {
        let mut l = Listeners::default();
        for (k, v) in pairs {
            assert!(l.set(k, v).map_err(|e| e.to_string())?, "{k} is a listener key");
        }
        l.served(CURRENT.parse().unwrap(), deployment)
            .map_err(|e| e.to_string())
    }

    fn served(pairs: &[(&str, &str)]) -> Result<Vec<Served>, String> {
        served_as(pairs, Deployment::Standalone)
    }

    fn at(name: &str, listen: (&str, u16), advertised: (&str, u16)) -> Served {
        Served {
            name: name.into(),
            protocol: SecurityProtocol::parse(name).unwrap_or(SecurityProtocol::Plaintext),
            listen_host: listen.0.into(),
            listen_port: listen.1,
            advertised_host: advertised.0.into(),
            advertised_port: advertised.1,
        }
    }

    #[test]
    fn one_plaintext_listener_is_served_with_its_advertised_address() {
        assert_eq!(served(&[]), Ok(vec![]));
        let plain = |listen, advertised| Ok(vec![at("PLAINTEXT", listen, advertised)]);
        assert_eq!(
            served(&[("listeners", "PLAINTEXT://0.0.0.0:9092")]),
            plain(("0.0.0.0", 9092), ("127.0.0.1", 9092))
        );
        assert_eq!(
            served(&[("listeners", "PLAINTEXT://:9092")]),
            plain(("0.0.0.0", 9092), ("127.0.0.1", 9092))
        );
        assert_eq!(
            served(&[
                ("listeners", "PLAINTEXT://0.0.0.0:9092"),
                ("advertised.listeners", "PLAINTEXT://kafka-1.example:19092")
            ]),
            plain(("0.0.0.0", 9092), ("kafka-1.example", 19092))
        );
        assert_eq!(
            served(&[("listeners", "10.0.0.5:9092")]),
            plain(("10.0.0.5", 9092), ("10.0.0.5", 9092)),
            "a bare host:port is PLAINTEXT"
        );
        assert_eq!(
            served(&[
                ("listeners", "internal://10.0.0.5:9092"),
                ("listener.security.protocol.map", "INTERNAL:PLAINTEXT,EXTERNAL:SSL"),
                ("inter.broker.listener.name", "INTERNAL"),
            ]),
            Ok(vec![at("INTERNAL", ("10.0.0.5", 9092), ("10.0.0.5", 9092))]),
            "a named listener mapped to PLAINTEXT"
        );
        assert_eq!(
            served(&[("advertised.listeners", "PLAINTEXT://kafka-1.example:9092")]),
            plain(("0.0.0.0", 19092), ("kafka-1.example", 9092)),
            "advertised without listeners: the address the broker already listens on"
        );
    }

    #[test]
    fn a_standalone_broker_serves_several_listeners_the_inter_broker_one_first() {
        let both = served(&[
            ("listeners", "SSL://:9093,PLAINTEXT://127.0.0.1:9092"),
            ("advertised.listeners", "SSL://kafka.example:9093"),
        ])
        .expect("served");
        assert_eq!(
            both,
            vec![
                at("PLAINTEXT", ("127.0.0.1", 9092), ("127.0.0.1", 9092)),
                at("SSL", ("0.0.0.0", 9093), ("kafka.example", 9093)),
            ],
            "the PLAINTEXT listener is the primary; a listener advertised by no entry advertises its own host"
        );
        let named = served(&[
            ("listeners", "A://:1,B://:2,C://:3"),
            ("listener.security.protocol.map", "A:PLAINTEXT,B:SSL,C:PLAINTEXT"),
            ("inter.broker.listener.name", "C"),
        ])
        .expect("served");
        let names: Vec<&str> = named.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["C", "A", "B"], "the named one first, the others in their order");
        let sasl = served(&[
            ("listeners", "SASL_SSL://:9094,SSL://:9093"),
            ("security.inter.broker.protocol", "SSL"),
        ])
        .expect("served");
        let names: Vec<&str> = sasl.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["SSL", "SASL_SSL"],
            "standalone: the first listener of the inter-broker protocol"
        );
        let only_ssl = served(&[("listeners", "SSL://127.0.0.1:9093")]).expect("served");
        assert_eq!(only_ssl, vec![at("SSL", ("127.0.0.1", 9093), ("127.0.0.1", 9093))]);
    }

    #[test]
    fn what_ferrite_cannot_serve_is_refused_with_the_reason() {
        let refused = |pairs: &[(&str, &str)], why: &str| {
            let e = served(pairs).expect_err("refused");
            assert!(e.contains(why), "{e}");
        };
        refused(
            &[("listeners", "PLAINTEXT://:9093,SSL://127.0.0.1:9093")],
            "two listeners on port 9093",
        );
        refused(
            &[
                ("listeners", "PLAINTEXT://:9092,EXTERNAL://:9093"),
                ("listener.security.protocol.map", "EXTERNAL:SSL"),
            ],
            "listener PLAINTEXT is not in the map",
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
        assert!(
            served(&[("security.inter.broker.protocol", "plaintext")]).is_ok(),
            "names are case-blind"
        );
    }

    #[test]
    fn a_cluster_broker_serves_one_plaintext_listener_so_far() {
        let refused = |pairs: &[(&str, &str)], why: &str| {
            let e = served_as(pairs, Deployment::Cluster).expect_err("refused");
            assert!(e.contains(why), "{e}");
        };
        refused(&[("listeners", "SSL://h:9093")], "needs a PLAINTEXT listener");
        refused(
            &[("listeners", "PLAINTEXT://h:9092,SSL://h:9093")],
            "serves one listener so far",
        );
        refused(
            &[
                ("listeners", "EXTERNAL://h:9093"),
                ("listener.security.protocol.map", "EXTERNAL:SSL"),
                ("inter.broker.listener.name", "EXTERNAL"),
            ],
            "PLAINTEXT so far",
        );
        refused(&[("listeners", "SASL_SSL://h:9093")], "needs a PLAINTEXT listener");
        refused(
            &[
                ("listeners", "PLAINTEXT://h:9092"),
                ("security.inter.broker.protocol", "SSL"),
            ],
            "only PLAINTEXT",
        );
        assert!(served_as(&[("listeners", "PLAINTEXT://h:9092")], Deployment::Cluster).is_ok());
    }
}
