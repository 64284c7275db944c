//! TLS on an SSL listener, in userspace: rustls (with ring's primitives;
//! no OpenSSL in the broker), its handshake run on the connection's own
//! shard, under a time limit.
//!
//! What the broker offers: TLS 1.2 and 1.3 (`ssl.enabled.protocols` may
//! narrow it), AEAD suites only (AES-128/256-GCM, ChaCha20-Poly1305, with
//! ECDHE), its certificate chain and key from PEM, and, with
//! `ssl.client.auth`, client certificates checked against the PEM
//! truststore (`requested`: checked if sent; `required`: a client without
//! one is refused in the handshake).
//!
//! Once the handshake is done the connection reads and writes through the
//! session (`futures-rustls`); a fetch's file regions are read into memory
//! and encrypted there, not sent by `sendfile` (the kernel would send them
//! in the clear). Kernel TLS (handing the session's keys to the socket, so
//! that `sendfile` works again) is not built: this machine's kernel has no
//! `CONFIG_TLS` to test it on.
//!
//! Counted in `ferrite_tls_handshakes_total{outcome}`: `ok`, `failed` (a
//! plaintext client, a certificate the truststore does not vouch for, no
//! certificate where one is required, no common protocol or suite) and
//! `timed_out`.

use std::sync::Arc;
use std::time::Duration;

use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use glommio::net::TcpStream;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::TransportError;

/// A client that has not finished its handshake by then is dropped: a
/// connection that says nothing holds no more than this.
pub const HANDSHAKE_MS_MAX: u64 = 10_000;

/// Whether, and how, client certificates are checked (`ssl.client.auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCertificates {
    NotAsked,
    CheckedIfSent,
    Required,
}

/// A TLS version offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Tls12,
    Tls13,
}

/// What a listener's TLS is made of: PEM text, as read from the files or
/// given inline.
pub struct ServerSettings<'a> {
    /// The certificate chain, leaf first; the key may be in the same text.
    pub chain_pem: &'a [u8],
    pub key_pem: &'a [u8],
    /// The CAs that vouch for client certificates.
    pub trust_pem: Option<&'a [u8]>,
    pub client_certificates: ClientCertificates,
    pub versions: &'a [Version],
}

/// The listener's side of every handshake.
#[derive(Clone)]
pub struct Acceptor {
    inner: TlsAcceptor,
}

impl Acceptor {
    /// Parses the key, the chain and the truststore, or says what is wrong
    /// with them.
    pub fn new(s: &ServerSettings<'_>) -> Result<Acceptor, TransportError> {
        // ring, not aws-lc-rs: a C build of minutes less. rustls marks it
        // deprecated because it offers no post-quantum key exchange; the
        // clients of today agree on X25519 or P-256 with it.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certificates(s.chain_pem, "certificate chain")?;
        let key = PrivateKeyDer::from_pem_slice(&pem_lines(s.key_pem)).map_err(|e| TransportError::Pem {
            what: "private key",
            reason: match e {
                rustls_pki_types::pem::Error::NoItemsFound => {
                    "no unencrypted private key (PKCS#8, PKCS#1 or SEC1) found".to_string()
                }
                e => e.to_string(),
            },
        })?;
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = s
            .versions
            .iter()
            .map(|v| match v {
                Version::Tls12 => &rustls::version::TLS12,
                Version::Tls13 => &rustls::version::TLS13,
            })
            .collect();
        let tls = |op| move |source| TransportError::Tls { op, source };
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(tls("protocol versions"))?;
        let builder = match (s.client_certificates, s.trust_pem) {
            (ClientCertificates::NotAsked, _) => builder.with_no_client_auth(),
            (_, None) => {
                return Err(TransportError::Pem {
                    what: "truststore",
                    reason: "client certificates are checked, but no truststore is given".into(),
                })
            }
            (mode, Some(trust)) => {
                let mut roots = RootCertStore::empty();
                for ca in certificates(trust, "truststore")? {
                    roots.add(ca).map_err(tls("truststore certificate"))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = match mode {
                    ClientCertificates::CheckedIfSent => verifier.allow_unauthenticated(),
                    _ => verifier,
                };
                let verifier = verifier.build().map_err(|e| TransportError::Pem {
                    what: "truststore",
                    reason: e.to_string(),
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(tls("certificate and key"))?;
        Ok(Acceptor {
            inner: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// Runs the server's side of the handshake on `stream`, within
    /// [`HANDSHAKE_MS_MAX`].
    pub async fn handshake(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        let limit = Duration::from_millis(HANDSHAKE_MS_MAX);
        let done = futures_lite::future::or(async { Some(self.inner.accept(stream).await) }, async {
            glommio::timer::sleep(limit).await;
            None
        })
        .await;
        match done {
            Some(Ok(s)) => {
                crate::metrics::tls_handshake(Outcome::Ok);
                Ok(s)
            }
            Some(Err(e)) => {
                crate::metrics::tls_handshake(Outcome::Failed);
                Err(e)
            }
            None => {
                crate::metrics::tls_handshake(Outcome::TimedOut);
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "TLS handshake not finished in time",
                ))
            }
        }
    }
}

/// How a handshake ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    TimedOut,
}

fn certificates(pem: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs = CertificateDer::pem_slice_iter(&pem_lines(pem))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TransportError::Pem {
            what,
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TransportError::Pem {
            what,
            reason: "no CERTIFICATE section found (a JKS or PKCS12 store? only PEM is read)".into(),
        });
    }
    Ok(certs)
}

/// PEM text laid out as the parser reads it: each BEGIN and END marker on
/// a line of its own, the base64 between them without blanks, in lines
/// of 64. Kafka takes a certificate or key given on one line (a value in
/// server.properties, or one continued over lines with `\`, which joins
/// them); the parser needs the line breaks. Text with no marker is
/// returned as it is, for the parser to refuse.
pub fn pem_lines(text: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let mut out = String::new();
    let mut rest: &str = &text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_len) = after.find("-----") else { break };
        let label = &after[..label_len];
        let body = &after[label_len + "-----".len()..];
        let end = format!("-----END {label}-----");
        let Some(body_len) = body.find(&end) else { break };
        let base64: String = body[..body_len].chars().filter(|c| !c.is_whitespace()).collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in base64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&end);
        out.push('\n');
        rest = &body[body_len + end.len()..];
    }
    match out.is_empty() {
        true => text.as_bytes().to_vec(),
        false => out.into_bytes(),
    }
}

/// A region is read into memory this much at a time when it goes through
/// a TLS session (what one write hands the session).
pub const REGION_READ_BYTES_MAX: u64 = 256 << 10;

/// Sends `[chunk.position, + chunk.len)` of the chunk's file through `w`,
/// a TLS session: read into memory on the blocking pool (a cold region
/// faults its pages in there, not on the shard), a piece at a time, each
/// written before the next is read. A client that takes nothing for
/// `SEND_STALL_MS_MAX` is given up on, as on a plaintext connection.
pub async fn send_region<W: futures_lite::AsyncWrite + Unpin>(
    w: &mut W,
    chunk: &ferrite_protocol::response::FileChunk,
) -> std::io::Result<()> {
    use futures_lite::AsyncWriteExt;
    use std::os::fd::AsRawFd;
    let end = chunk.position + chunk.len;
    let mut at = chunk.position;
    let stall = Duration::from_millis(crate::sendfile::SEND_STALL_MS_MAX);
    while at < end {
        let len = (end - at).min(REGION_READ_BYTES_MAX);
        let fd = chunk.fd.as_raw_fd();
        // The file stays open while this runs: the chunk owns it, and the
        // caller awaits the read.
        let piece = glommio::executor().spawn_blocking(move || read_at(fd, at, len)).await?;
        let written = futures_lite::future::or(async { Some(w.write_all(&piece).await) }, async {
            glommio::timer::sleep(stall).await;
            None
        })
        .await;
        match written {
            Some(r) => r?,
            None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "client stopped reading",
                ))
            }
        }
        crate::metrics::file_sent_tls(len);
        at += len;
    }
    Ok(())
}

/// `len` bytes of `fd` at `pos`, all of them (a file cut short meanwhile is
/// an error, as for `sendfile`).
fn read_at(fd: std::os::fd::RawFd, pos: u64, len: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    let mut got = 0usize;
    while got < buf.len() {
        let off = libc::off_t::try_from(pos + got as u64).map_err(|_| std::io::Error::other("offset past off_t"))?;
        // SAFETY: the buffer has `buf.len() - got` bytes of room at `got`;
        // `fd` is open (see the caller).
        let n = unsafe { libc::pread(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got, off) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file region ends before its length",
            ));
        }
        got += n as usize;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_on_one_line_is_laid_out_in_lines() {
        let body = "QUJD".repeat(40);
        let one_line = format!("-----BEGIN CERTIFICATE----- {body} -----END CERTIFICATE----------BEGIN PRIVATE KEY-----AAAA-----END PRIVATE KEY-----");
        let out = String::from_utf8(pem_lines(one_line.as_bytes())).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines[1..4].concat(), body);
        assert_eq!(lines[4], "-----END CERTIFICATE-----");
        assert_eq!(
            &lines[5..],
            ["-----BEGIN PRIVATE KEY-----", "AAAA", "-----END PRIVATE KEY-----"]
        );
        assert_eq!(pem_lines(b"no markers"), b"no markers");
    }
}
