//! SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2,
//! flexible from v2): a client on a SASL listener names a mechanism, then
//! sends the mechanism's messages wrapped in SaslAuthenticate (KIP-152)
//! until the broker says who it is.
//!
//! SaslHandshake request: mechanism string. Response: error_code int16,
//! mechanisms [string] (those the listener offers).
//!
//! SaslAuthenticate request: auth_bytes bytes. Response: error_code int16,
//! error_message nullable string, auth_bytes bytes, session_lifetime_ms
//! int64 (v1+; 0: no re-authentication asked, KIP-368).
//!
//! SaslHandshake v0 is listed in ApiVersions (librdkafka takes the range
//! 0–1 as the sign that SASL is there) but refused when sent: after a v0
//! handshake a client would send its tokens as bare frames without a Kafka
//! header (before KIP-152), which no current client does.

use bytes::Bytes;

use super::wire::{Reader, WireResult, Writer};

pub const HANDSHAKE_KEY: i16 = 17;
pub const HANDSHAKE_VERSION_MIN: i16 = 0;
pub const HANDSHAKE_VERSION_MAX: i16 = 1;
/// SaslHandshake is never flexible.
pub const HANDSHAKE_FLEXIBLE_FROM: i16 = i16::MAX;
pub const AUTHENTICATE_KEY: i16 = 36;
pub const AUTHENTICATE_VERSION_MAX: i16 = 2;
pub const AUTHENTICATE_FLEXIBLE_FROM: i16 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslHandshakeRequest {
    pub mechanism: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslHandshakeResponse {
    pub error_code: i16,
    pub mechanisms: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslAuthenticateRequest {
    pub auth_bytes: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslAuthenticateResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub auth_bytes: Vec<u8>,
    pub session_lifetime_ms: i64,
}

impl SaslHandshakeRequest {
    pub fn decode(r: &mut Reader) -> WireResult<SaslHandshakeRequest> {
        Ok(SaslHandshakeRequest {
            mechanism: r.string(false, "mechanism")?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.string(false, &self.mechanism);
    }
}

impl SaslHandshakeResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i16(self.error_code);
        w.array_len(false, Some(self.mechanisms.len()));
        for m in &self.mechanisms {
            w.string(false, m);
        }
    }

    pub fn decode(r: &mut Reader) -> WireResult<SaslHandshakeResponse> {
        let error_code = r.i16("error_code")?;
        let n = r.array_len_required(false, 2, "mechanisms")?;
        let mut mechanisms = Vec::new();
        for _ in 0..n {
            mechanisms.push(r.string(false, "mechanism")?);
        }
        Ok(SaslHandshakeResponse { error_code, mechanisms })
    }
}

impl SaslAuthenticateRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<SaslAuthenticateRequest> {
        let f = version >= AUTHENTICATE_FLEXIBLE_FROM;
        let auth_bytes = r.bytes(f, "auth_bytes")?;
        r.tagged_fields_if(f)?;
        Ok(SaslAuthenticateRequest { auth_bytes })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= AUTHENTICATE_FLEXIBLE_FROM;
        w.nullable_bytes(f, Some(&self.auth_bytes));
        w.empty_tagged_fields_if(f);
    }
}

impl SaslAuthenticateResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = version >= AUTHENTICATE_FLEXIBLE_FROM;
        w.i16(self.error_code);
        w.nullable_string(f, self.error_message.as_deref());
        w.nullable_bytes(f, Some(&self.auth_bytes));
        if version >= 1 {
            w.i64(self.session_lifetime_ms);
        }
        w.empty_tagged_fields_if(f);
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<SaslAuthenticateResponse> {
        let f = version >= AUTHENTICATE_FLEXIBLE_FROM;
        let error_code = r.i16("error_code")?;
        let error_message = r.nullable_string(f, "error_message")?;
        let auth_bytes = r.bytes(f, "auth_bytes")?.to_vec();
        let session_lifetime_ms = if version >= 1 { r.i64("session_lifetime_ms")? } else { 0 };
        r.tagged_fields_if(f)?;
        Ok(SaslAuthenticateResponse {
            error_code,
            error_message,
            auth_bytes,
            session_lifetime_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    #[test]
    fn round_trips_at_every_version() {
        let req = SaslHandshakeRequest {
            mechanism: "SCRAM-SHA-512".into(),
        };
        let bytes = round_trip(&req, |x, w| x.encode(w), SaslHandshakeRequest::decode);
        every_prefix_fails(&bytes, SaslHandshakeRequest::decode);
        let resp = SaslHandshakeResponse {
            error_code: 33,
            mechanisms: vec!["PLAIN".into(), "SCRAM-SHA-256".into()],
        };
        round_trip(&resp, |x, w| x.encode(w), SaslHandshakeResponse::decode);
        for v in 0..=AUTHENTICATE_VERSION_MAX {
            let req = SaslAuthenticateRequest {
                auth_bytes: Bytes::from_static(b"n,,n=alice,r=abc"),
            };
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| SaslAuthenticateRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| SaslAuthenticateRequest::decode(r, v));
            let resp = SaslAuthenticateResponse {
                error_code: 58,
                error_message: Some("Authentication failed".into()),
                auth_bytes: b"v=xyz".to_vec(),
                session_lifetime_ms: if v >= 1 { 3_600_000 } else { 0 },
            };
            round_trip(&resp, |x, w| x.encode(w, v), |r| SaslAuthenticateResponse::decode(r, v));
        }
    }
}
