//! SaslHandshake and SaslAuthenticate answers. On a SASL listener they are
//! answered by the connection's authentication (`net/sasl_gate.rs`) before
//! any other request; anywhere else (a listener without SASL, or a second
//! round after authentication: re-authentication is not built) they get
//! ILLEGAL_SASL_STATE, as Kafka answers them.

use ferrite_protocol::api::ApiKey;
use ferrite_protocol::errors::ErrorCode;
use ferrite_protocol::header::{write_response_header, RequestHeader};
use ferrite_protocol::response::ResponseBuilder;
use ferrite_protocol::sasl::{SaslAuthenticateResponse, SaslHandshakeResponse};

use super::Reply;

pub fn handshake_reply(header: &RequestHeader, error: ErrorCode, mechanisms: Vec<String>) -> Reply {
    let mut b = ResponseBuilder::new();
    write_response_header(&mut b.w, header.correlation_id, ApiKey::SaslHandshake, false);
    SaslHandshakeResponse {
        error_code: error.code(),
        mechanisms,
    }
    .encode(&mut b.w);
    Reply::of(b)
}

pub fn authenticate_reply(
    header: &RequestHeader,
    flexible: bool,
    error: ErrorCode,
    message: Option<String>,
    auth_bytes: Vec<u8>,
) -> Reply {
    let mut b = ResponseBuilder::new();
    write_response_header(&mut b.w, header.correlation_id, ApiKey::SaslAuthenticate, flexible);
    SaslAuthenticateResponse {
        error_code: error.code(),
        error_message: message,
        auth_bytes,
        session_lifetime_ms: 0,
    }
    .encode(&mut b.w, header.api_version);
    Reply::of(b)
}

/// A SASL request where no authentication is under way.
pub fn refused(header: &RequestHeader, flexible: bool) -> Reply {
    match header.api_key {
        ferrite_protocol::sasl::HANDSHAKE_KEY => handshake_reply(header, ErrorCode::IllegalSaslState, Vec::new()),
        _ => authenticate_reply(
            header,
            flexible,
            ErrorCode::IllegalSaslState,
            Some("no SASL authentication is under way on this connection".into()),
            Vec::new(),
        ),
    }
}
