//! Test support shared by the crates' integration tests. Only tests use it.
//!
//! - [`zookeeper`]: real ZooKeeper servers (Debian's `zookeeper` package) on
//!   loopback ports, one or an ensemble of three, each stopped by the test that
//!   started it (and only that one).
//! - [`rng`]: the seeded random source of the simulations and model tests;
//! - [`certs`]: a CA and certificates for TLS tests, made fresh per run.
//!
//! Depends on no crate of ours, so any crate may take it as a
//! dev-dependency (and the benchmarks and the fault suite as a dependency);
//! no crate's non-test code may use it.

pub mod certs;
pub mod rng;
pub mod zookeeper;

/// A free loopback TCP port (bound then released; good enough for tests).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}
