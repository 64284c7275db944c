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
//! failed; the reason goes to the log (at INFO, with the peer). Counted in
//! `ferrite_sasl_authentications_total{mechanism, outcome}`.

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

/// What comes after a request's answer.
enum Then {
    Continue,
    Authenticated(Principal),
    Close,
}

/// Authenticates the client on `stream` (`raw`: its socket, for a
/// plaintext one); its principal, or `None` when the connection is to be
/// closed.
pub async fn authenticate<S>(
    shard: &Rc<BrokerShard>,
    stream: &mut S,
    raw: Option<RawFd>,
    offered: &[Mechanism],
    receive_max: usize,
    peer: Option<std::net::SocketAddr>,
) -> Option<Principal>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    let limit = std::time::Duration::from_millis(AUTHENTICATION_MS_MAX);
    let mut session = SaslSession::new(offered.to_vec());
    let mut chosen = None;
    let done = futures_lite::future::or(
        async { Some(exchange(shard, stream, raw, &mut session, &mut chosen, receive_max, peer).await) },
        async {
            glommio::timer::sleep(limit).await;
            None
        },
    )
    .await;
    let mechanism = chosen.map(|m: Mechanism| m.name()).unwrap_or("none");
    match done {
        Some(Some(p)) => {
            crate::metrics::sasl_authentication(mechanism, "ok");
            tracing::debug!(?peer, principal = %p, mechanism, "authenticated");
            Some(p)
        }
        Some(None) => {
            crate::metrics::sasl_authentication(mechanism, "failed");
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
    session: &mut SaslSession,
    chosen: &mut Option<Mechanism>,
    receive_max: usize,
    peer: Option<std::net::SocketAddr>,
) -> Option<Principal>
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    let mut carry = SizeCarry::default();
    loop {
        let frame = match read_frame(stream, raw, receive_max, &mut carry).await {
            Ok(Some(f)) => f,
            Ok(None) => return None,
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection before authentication");
                return None;
            }
        };
        let (reply, then) = match decode_frame(frame.freeze()) {
            Ok(Decoded::Request(req)) => step(shard, session, chosen, *req, peer).await,
            Ok(Decoded::ApiVersionsUnsupported(header)) => {
                (handlers::api_versions_unsupported(&header), Then::Continue)
            }
            Err(e) => {
                tracing::info!(?peer, error = %e, "closing connection before authentication");
                return None;
            }
        };
        if let Err(e) = write_replies(stream, raw, &[reply]).await {
            tracing::debug!(?peer, error = %e, "closing connection before authentication");
            return None;
        }
        match then {
            Then::Continue => {}
            Then::Authenticated(p) => return Some(p),
            Then::Close => return None,
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
        RequestBody::SaslAuthenticate(a) => match session.authenticate(&a.auth_bytes, &MetaCredentials(shard.meta())) {
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

fn code_of(e: &SecurityError) -> ErrorCode {
    match e {
        SecurityError::UnsupportedMechanism { .. } => ErrorCode::UnsupportedSaslMechanism,
        SecurityError::IllegalState { .. } => ErrorCode::IllegalSaslState,
        _ => ErrorCode::SaslAuthenticationFailed,
    }
}
