//! The run's private network: a network namespace of its own, whose
//! loopback carries every node, and nftables rules that cut chosen pairs
//! of nodes apart. Nothing here touches the host's network.
//!
//! Every node listens on its own address in 127.0.0.0/8 and runs as its own
//! user. Loopback connections all leave from 127.0.0.1, so a packet's
//! source address does not say which node sent it; its sending socket's
//! user does. The first packet of each connection therefore stamps the
//! connection's conntrack mark with two bytes: the sender's node number
//! (from the socket's uid) and the receiver's (from the destination
//! address). A cut between nodes `a` and `b` adds the marks `a | b << 8`
//! and `b | a << 8` to a set whose packets are dropped — in both
//! directions, connections opened before the cut included. A lossy link
//! adds the same marks to another set, whose packets are dropped at random,
//! [`LOSS_PCT`] in a hundred (the kernel here has no `netem` queueing
//! discipline, so links can lose packets but not delay them). Clients (the
//! runner's own threads, as root) are never marked, so no cut stops them.

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use crate::error::ChaosError;

/// A node's number: the last byte of its address, and its uid less
/// [`UID_BASE`].
pub type NodeNumber = u8;

/// Node `n` runs as user `UID_BASE + n`.
pub const UID_BASE: u32 = 20_000;

const TABLE: &str = "ferrite_chaos";

/// Packets in a hundred a lossy link drops.
pub const LOSS_PCT: u32 = 20;

pub fn address(n: NodeNumber) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

pub fn uid(n: NodeNumber) -> u32 {
    UID_BASE + u32::from(n)
}

/// Moves this process into a new network namespace with its loopback up.
/// Call it before any thread starts: only the calling thread moves, and
/// what it starts afterwards (threads, children) follows it.
pub fn enter_private_namespace() -> Result<(), ChaosError> {
    // SAFETY: unshare(2) takes flags only and changes this thread's
    // namespaces; no memory is involved.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(ChaosError::Io {
            op: "unshare(CLONE_NEWNET) (needs root)",
            source: std::io::Error::last_os_error(),
        });
    }
    run("ip", &["link", "set", "lo", "up"])
}

/// The nftables ruleset that stamps each connection and drops the cut
/// ones, for the nodes numbered `nodes`.
pub fn ruleset(nodes: &[NodeNumber]) -> String {
    let mut r =
        format!("table ip {TABLE} {{\n  set cuts {{ type mark; }}\n  set lossy {{ type mark; }}\n  chain out {{\n");
    r.push_str("    type filter hook output priority 0; policy accept;\n");
    for &n in nodes {
        r.push_str(&format!("    ct state new meta skuid {} ct mark set {n:#x}\n", uid(n)));
    }
    for &n in nodes {
        let mark = u32::from(n) << 8;
        r.push_str(&format!(
            "    ct state new ip daddr {} ct mark set ct mark or {mark:#x}\n",
            address(n)
        ));
    }
    r.push_str("    ct mark @cuts drop\n");
    r.push_str(&format!(
        "    ct mark @lossy numgen random mod 100 < {LOSS_PCT} drop\n  }}\n}}\n"
    ));
    r
}

/// The two marks a cut between `a` and `b` drops.
pub fn cut_marks(a: NodeNumber, b: NodeNumber) -> [u32; 2] {
    let (a, b) = (u32::from(a), u32::from(b));
    [a | b << 8, b | a << 8]
}

/// The namespace's nftables state.
pub struct Firewall;

impl Firewall {
    /// Loads the ruleset for `nodes` (installing nothing: `nft` must be
    /// there; the test command installs Debian's `nftables`).
    pub fn install(nodes: &[NodeNumber]) -> Result<Firewall, ChaosError> {
        nft_stdin(&ruleset(nodes))?;
        Ok(Firewall)
    }

    pub fn cut(&self, a: NodeNumber, b: NodeNumber) -> Result<(), ChaosError> {
        let [x, y] = cut_marks(a, b);
        run(
            "nft",
            &["add", "element", "ip", TABLE, "cuts", &format!("{{ {x:#x}, {y:#x} }}")],
        )
    }

    /// Makes the link between `a` and `b` drop [`LOSS_PCT`] % of its
    /// packets, both ways.
    pub fn lossy(&self, a: NodeNumber, b: NodeNumber) -> Result<(), ChaosError> {
        let [x, y] = cut_marks(a, b);
        run(
            "nft",
            &["add", "element", "ip", TABLE, "lossy", &format!("{{ {x:#x}, {y:#x} }}")],
        )
    }

    /// Removes every cut and every lossy link.
    pub fn heal(&self) -> Result<(), ChaosError> {
        run("nft", &["flush", "set", "ip", TABLE, "cuts"])?;
        run("nft", &["flush", "set", "ip", TABLE, "lossy"])
    }
}

/// Runs a command to its end; an error with its stderr if it failed.
pub(crate) fn run(program: &'static str, args: &[&str]) -> Result<(), ChaosError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| ChaosError::Io { op: program, source })?;
    if !out.status.success() {
        return Err(ChaosError::Command {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

fn nft_stdin(rules: &str) -> Result<(), ChaosError> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ChaosError::Io { op: "nft", source })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(rules.as_bytes()).map_err(|source| ChaosError::Io {
            op: "nft stdin",
            source,
        })?;
    }
    let out = child
        .wait_with_output()
        .map_err(|source| ChaosError::Io { op: "nft", source })?;
    if !out.status.success() {
        return Err(ChaosError::Command {
            command: "nft -f -".into(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_drops_both_directions() {
        assert_eq!(cut_marks(11, 21), [0x150b, 0x0b15]);
    }

    #[test]
    fn the_ruleset_stamps_senders_and_receivers() {
        let r = ruleset(&[11, 21]);
        assert!(r.contains("meta skuid 20011 ct mark set 0xb"), "{r}");
        assert!(r.contains("ip daddr 127.0.0.21 ct mark set ct mark or 0x1500"), "{r}");
        assert!(r.contains("ct mark @cuts drop"), "{r}");
        assert!(r.contains("ct mark @lossy numgen random mod 100 < 20 drop"), "{r}");
    }
}
