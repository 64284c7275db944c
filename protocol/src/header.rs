//! Request and response headers.
//!
//! Request header v1 (classic APIs): api_key int16, api_version int16,
//! correlation_id int32, client_id nullable string (int16 length).
//! v2 (flexible versions) adds a tagged-field section after client_id, which
//! stays a classic string. Response header v0: correlation_id int32; v1 adds
//! tagged fields — except that ApiVersions always answers with v0, so that a
//! client that sent a version the broker does not know can still read it.

use super::api::{ApiKey, ApiSupport};
use super::wire::{Reader, WireResult, Writer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// What the header says about the request body.
#[derive(Clone, Copy, Debug)]
pub enum Route {
    /// A supported API at a supported version.
    Known { api: ApiSupport, flexible: bool },
    /// ApiVersions at a version Ferrite does not know: answered with
    /// UNSUPPORTED_VERSION and the supported ranges.
    ApiVersionsUnsupported,
    /// Anything else unknown: the connection is closed.
    Unknown,
}

impl RequestHeader {
    /// Decodes the header; on success the reader is at the body.
    pub fn decode(r: &mut Reader) -> WireResult<(RequestHeader, Route)> {
        let api_key = r.i16("api_key")?;
        let api_version = r.i16("api_version")?;
        let correlation_id = r.i32("correlation_id")?;
        let client_id = r.nullable_string(false, "client_id")?;
        let header = RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id,
        };
        let route = match ApiKey::from_code(api_key) {
            Some(api) if api.accepts(api_version) => {
                let flexible = api.is_flexible(api_version);
                if flexible {
                    r.skip_tagged_fields()?;
                }
                Route::Known { api, flexible }
            }
            Some(api) if api.key == ApiKey::ApiVersions => Route::ApiVersionsUnsupported,
            _ => Route::Unknown,
        };
        Ok((header, route))
    }
}

/// Writes a response header for `api` at a version whose flexibility is
/// `flexible`.
pub fn write_response_header(w: &mut Writer, correlation_id: i32, api: ApiKey, flexible: bool) {
    w.i32(correlation_id);
    if flexible && api != ApiKey::ApiVersions {
        w.empty_tagged_fields_if(true);
    }
}
