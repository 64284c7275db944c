//! Whether another socket already listens on the address a broker is about
//! to listen on.
//!
//! Every shard binds its listener with SO_REUSEPORT, which the kernel lets
//! any process of the same user join: a second broker started on a taken
//! port would silently share the first one's connections, each client
//! landing on either broker by a hash of its address. A plain bind cannot
//! tell: it also fails on the connections a previous broker on the same
//! port left closing (they carry SO_REUSEPORT, not SO_REUSEADDR), which a
//! restart must not be refused for. So the kernel's socket table is read
//! instead: `/proc/net/tcp` and `/proc/net/tcp6` list every socket of this
//! network namespace, and a listening one (state `0A`) on the same port and
//! an overlapping address means the address is taken.
//!
//! A listener of a broker killed a moment ago can outlive its process (seen
//! in CI: a broker restarted after SIGKILL found it listening), most likely
//! because an accept still in flight on the process's io_uring holds the
//! socket until the ring is torn down, after the process is gone. It still takes
//! connections in its turn meanwhile, which nobody accepts. So a broker
//! restarting on its own address waits for such a socket to go
//! ([`wait_free`]), and refuses to start only if it stays.
//!
//! Layout of a line (after the header): `sl: LOCAL REMOTE ST ...`, where
//! LOCAL is `ADDR:PORT` in hex. PORT is the number itself; ADDR is the
//! address's bytes as the kernel holds them (network order) printed as one
//! native-endian 32-bit word per four bytes (`%08X`), so on this machine
//! `0100007F` is 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// How often [`wait_free`] looks again.
const RECHECK_MS: u64 = 100;

/// [`check_free`], again until `patience` has passed while the address is
/// taken.
pub fn wait_free(addr: SocketAddr, patience: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + patience;
    let mut told = false;
    loop {
        match check_free(addr) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(e) => {
                if !told {
                    tracing::warn!(%addr, error = %e, "waiting for the address to be released");
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(RECHECK_MS));
            }
        }
    }
}

/// TCP_LISTEN in the kernel's state numbering.
const STATE_LISTEN: &str = "0A";

/// `Err` with the listener found if a socket already listens on `addr`'s
/// port at an address that overlaps it (the same one, or either a
/// wildcard). Port 0 is never taken. A socket table that cannot be read
/// counts as nothing found.
pub fn check_free(addr: SocketAddr) -> std::io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        let found = listeners(&text).find(|l| overlaps(*l, addr));
        if let Some(found) = found {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("address already in use: a socket listens on {found}"),
            ));
        }
    }
    Ok(())
}

/// The listening sockets of one socket table.
fn listeners(table: &str) -> impl Iterator<Item = SocketAddr> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let mut fields = line.split_whitespace().skip(1);
        let local = fields.next()?;
        let _remote = fields.next()?;
        if fields.next()? != STATE_LISTEN {
            return None;
        }
        parse_local(local)
    })
}

fn parse_local(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(addr.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Four address bytes in the order the kernel holds them.
fn word(hex: &str) -> Option<[u8; 4]> {
    Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
}

/// Whether a listener on `existing` takes connections meant for `wanted`.
fn overlaps(existing: SocketAddr, wanted: SocketAddr) -> bool {
    if existing.port() != wanted.port() {
        return false;
    }
    let (a, b) = (canonical(existing.ip()), canonical(wanted.ip()));
    a == b || a.is_unspecified() || b.is_unspecified()
}

/// IPv4-mapped IPv6 addresses as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_and_a_bound_one_is_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let at = l.local_addr().expect("addr");
        assert!(check_free(at).is_err(), "{at} listens");
        let wildcard = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), at.port());
        assert!(check_free(wildcard).is_err(), "0.0.0.0 overlaps {at}");
        drop(l);
        assert!(check_free(at).is_ok(), "{at} no longer listens");
        // Bound, not listening: not taken.
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        s.bind(&at.into()).expect("bind again");
        assert!(check_free(at).is_ok());
    }

    #[test]
    fn the_kernels_table_is_read_as_it_prints_it() {
        let table = "  sl  local_address rem_address   st tx_queue\n\
             0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n\
             1: 0100007F:1F91 0100007F:A000 01 00000000:00000000\n";
        let found: Vec<_> = listeners(table).collect();
        assert_eq!(found, vec!["127.0.0.1:8080".parse::<SocketAddr>().expect("addr")]);
        let six = "  sl  local_address\n\
             0: 00000000000000000000000001000000:2384 00000000000000000000000000000000:0000 0A x\n";
        let found: Vec<_> = listeners(six).collect();
        assert_eq!(found, vec!["[::1]:9092".parse::<SocketAddr>().expect("addr")]);
    }

    #[test]
    fn a_listener_that_goes_within_the_patience_is_waited_for() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let at = l.local_addr().expect("addr");
        let closer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(l);
        });
        assert!(wait_free(at, Duration::from_secs(10)).is_ok());
        closer.join().expect("closer");
        let stays = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let started = Instant::now();
        assert!(wait_free(stays.local_addr().expect("addr"), Duration::from_millis(300)).is_err());
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[test]
    fn wildcards_and_mapped_addresses_overlap() {
        let a = |s: &str| s.parse::<SocketAddr>().expect("addr");
        assert!(overlaps(a("0.0.0.0:9092"), a("127.0.0.1:9092")));
        assert!(overlaps(a("127.0.0.1:9092"), a("0.0.0.0:9092")));
        assert!(overlaps(a("[::ffff:127.0.0.1]:9092"), a("127.0.0.1:9092")));
        assert!(overlaps(a("[::]:9092"), a("127.0.0.2:9092")));
        assert!(!overlaps(a("127.0.0.1:9092"), a("127.0.0.2:9092")));
        assert!(!overlaps(a("127.0.0.1:9093"), a("127.0.0.1:9092")));
    }
}
