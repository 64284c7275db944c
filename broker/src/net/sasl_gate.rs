//! Authentication on a SASL listener (`SASL_PLAINTEXT`, `SASL_SSL`), before
//! the connection serves anything else, in Kafka's order: ApiVersions (as
//! often as the client likes), SaslHandshake naming a mechanism the
//! listener offers, then SaslAuthenticate until the mechanism says who the
//! client is (`ferrite-security`'s `session.rs` keeps the state).
//!
//! The connection is closed, after the answer, on an unsupported mechanism,
//! a failed or out-of-order exchange; without an answer on any other
//! request, on a frame over `sasl.server.max.receive.size` (a huge token
//! costs at most that), or when the whole exchange takes longer than
//! [`AUTHENTICATION_MS_MAX`]. A client is told only that authentication
//! failed, [`FAILED_AUTHENTICATION_DELAY_MS`] later; the reason goes to the
//! log (at INFO, with the peer). The mechanism's work (PLAIN's password
//! hashing) runs on the blocking pool. Counted in
//! `ferrite_sasl_authentications_total{mechanism, outcome}` (`ok`,
//! `failed`, `closed` by the client, `timed_out`).

use std::os::unix::io::RawFd;
use std::rc::Rc;

use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::request::{decode_frame, Decoded, Request, RequestBody};
use ferrite_security::session::{Answer, Credentials, SaslSession};
use ferrite_security::{Mechanism, Principal, SecurityError};

use super::connection::{read_frame, write_replies, SizeCarry};
use crate::handlers::{self, sasl, Reply};
use crate::shard::BrokerShard;

/// The longest authentication may take, from the connection's start (or
/// its TLS handshake's end).
pub const AUTHENTICATION_MS_MAX: u64 = 30_000;

/// How an exchange ended without a principal.
enum Ended {
    /// Refused: a failed or out-of-order exchange, a bad frame.
    Failed,
    /// The client went away.
    Closed,
}

/// A failed authentication is answered this long after (Kafka's
/// `connection.failed.authentication.delay.ms`): a client guessing
/// passwords gets a few tries a second per connection, not thousands.
pub const FAILED_AUTHENTICATION_DELAY_MS: u64 = 100;

/// What comes after a request's answer.
enum Then {
    Continue,
    Authenticated(Principal),
    Close,
}

/// Authenticates the client on `stream` (`raw`: its socket, for a
/// plaintext one); its principal, or `None` when the connection is to be
/// closed. `carry` is left holding what the last read took of the next
/// frame (a client may send its next request right behind the last
/// SaslAuthenticate), for the connection's own reads to start from.
pub(super) async fn authenticate<S>(
    shard: &Rc<BrokerShard>,
    stream: &mut S,
    raw: Option<RawFd>,
    offered: &[Mechanism],
    receive_max: usize,
    peer: Option<std::net::SocketAddr>,
    carry: &mut SizeCarry,
) -> Option<Principal>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    let limit = std::time::Duration::from_millis(AUTHENTICATION_MS_MAX);
    let mut session = SaslSession::new(offered.to_vec());
    let mut chosen = None;
    let done = futures_lite::future::or(
        async {
            let limits = (receive_max, peer);
            Some(exchange(shard, stream, raw, (&mut session, &mut chosen), carry, limits).await)
        },
        async {
            glommio::timer::sleep(limit).await;
            None
        },
    )
    .await;
    let mechanism = chosen.map(|m: Mechanism| m.name()).unwrap_or("none");
    match done {
        Some(Ok(p)) => {
            crate::metrics::sasl_authentication(mechanism, "ok");
            tracing::debug!(?peer, principal = %p, mechanism, "authenticated");
            Some(p)
        }
        Some(Err(Ended::Failed)) => {
            crate::metrics::sasl_authentication(mechanism, "failed");
            None
        }
        Some(Err(Ended::Closed)) => {
            crate::metrics::sasl_authentication(mechanism, "closed");
            None
        }
        None => {
            crate::metrics::sasl_authentication(mechanism, "timed_out");
            tracing::info!(?peer, "closing connection: authentication not finished in time");
            None
        }
    }
}

async fn exchange<S>(
    shard: &Rc<BrokerShard>,
    stream: &mut S,
    raw: Option<RawFd>,
    (session, chosen): (&mut SaslSession, &mut Option<Mechanism>),
    carry: &mut SizeCarry,
    (receive_max, peer): (usize, Option<std::net::SocketAddr>),
) -> Result<Principal, Ended>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    loop {
        let frame = match read_frame(stream, raw, receive_max, carry).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Ended::Closed),
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection before authentication");
                return Err(Ended::Failed);
            }
        };
        let (reply, then) = match decode_frame(frame.freeze()) {
            Ok(Decoded::Request(req)) => step(shard, session, chosen, *req, peer).await,
            Ok(Decoded::ApiVersionsUnsupported(header)) => {
                (handlers::api_versions_unsupported(&header), Then::Continue)
            }
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection before authentication");
                return Err(Ended::Failed);
            }
        };
        if let Err(e) = write_replies(stream, raw, &[reply]).await {
            tracing::debug!(?peer, error = %e, "closing connection before authentication");
            return Err(Ended::Closed);
        }
        match then {
            Then::Continue => {}
            Then::Authenticated(p) => return Ok(p),
            Then::Close => return Err(Ended::Failed),
        }
    }
}

/// Where a user's credentials are: the broker's metadata.
struct MetaCredentials(std::sync::Arc<ferrite_controller::ClusterMeta>);

impl Credentials for MetaCredentials {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<ferrite_security::credential::ScramCredential> {
        handlers::scram_users::credential(&self.0, user, mechanism)
    }
}

async fn step(
    shard: &Rc<BrokerShard>,
    session: &mut SaslSession,
    chosen: &mut Option<Mechanism>,
    req: Request,
    peer: Option<std::net::SocketAddr>,
) -> (Reply, Then) {
    let (header, flexible) = (req.header.clone(), req.flexible);
    match req.body {
        RequestBody::ApiVersions(_) => (handlers::handle(shard, req).await, Then::Continue),
        RequestBody::SaslHandshake(_) if header.api_version == 0 => {
            tracing::info!(
                ?peer,
                "closing connection: SaslHandshake v0 (bare SASL tokens) is not served"
            );
            (
                sasl::handshake_reply(&header, ErrorCode::UnsupportedVersion, Vec::new()),
                Then::Close,
            )
        }
        RequestBody::SaslHandshake(h) => {
            let offered = session.offered().into_iter().map(String::from).collect();
            match session.handshake(&h.mechanism) {
                Ok(m) => {
                    *chosen = Some(m);
                    (sasl::handshake_reply(&header, ErrorCode::None, offered), Then::Continue)
                }
                Err(e) => {
                    tracing::info!(?peer, error = %e, "closing connection: SASL handshake refused");
                    (sasl::handshake_reply(&header, code_of(&e), offered), Then::Close)
                }
            }
        }
        RequestBody::SaslAuthenticate(a) => match off_the_shard(session, a.auth_bytes, shard.meta()).await {
            Ok(Answer::Challenge(c)) => (
                sasl::authenticate_reply(&header, flexible, ErrorCode::None, None, c),
                Then::Continue,
            ),
            Ok(Answer::Authenticated { principal, reply }) => (
                sasl::authenticate_reply(&header, flexible, ErrorCode::None, None, reply),
                Then::Authenticated(principal),
            ),
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection: SASL authentication failed");
                let mechanism = chosen.map(|m| m.name()).unwrap_or("none");
                let message = match e {
                    SecurityError::IllegalState { .. } => e.to_string(),
                    _ => format!("Authentication failed: invalid credentials with SASL mechanism {mechanism}"),
                };
                let reply = sasl::authenticate_reply(&header, flexible, code_of(&e), Some(message), Vec::new());
                glommio::timer::sleep(std::time::Duration::from_millis(FAILED_AUTHENTICATION_DELAY_MS)).await;
                (reply, Then::Close)
            }
        },
        _ => {
            tracing::info!(
                ?peer,
                api = req.api.name(),
                "closing connection: a request before SASL authentication"
            );
            (Reply::Nothing, Then::Close)
        }
    }
}

/// Runs one SaslAuthenticate step on the blocking pool: PLAIN hashes the
/// password (PBKDF2, milliseconds), which must not stall the shard's other
/// connections.
async fn off_the_shard(
    session: &mut SaslSession,
    token: bytes::Bytes,
    meta: std::sync::Arc<ferrite_controller::ClusterMeta>,
) -> Result<Answer, SecurityError> {
    let mut owned = std::mem::replace(session, SaslSession::new(Vec::new()));
    let (back, answer) = glommio::executor()
        .spawn_blocking(move || {
            let answer = owned.authenticate(&token, &MetaCredentials(meta));
            (owned, answer)
        })
        .await;
    *session = back;
    answer
}

fn code_of(e: &SecurityError) -> ErrorCode {
    match e {
        SecurityError::UnsupportedMechanism { .. } => ErrorCode::UnsupportedSaslMechanism,
        SecurityError::IllegalState { .. } => ErrorCode::IllegalSaslState,
        _ => ErrorCode::SaslAuthenticationFailed,
    }
}
