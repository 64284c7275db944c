//! ApiVersions (key 18), v0-3. The request body is empty before v3; v3
//! sends the client's software name and version. The response header is
//! always v0.

use super::api::SUPPORTED;
use super::errors::ErrorCode;
use super::wire::{Reader, WireResult, Writer};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiVersionsRequest {
    pub client_software_name: Option<String>,
    pub client_software_version: Option<String>,
}

impl ApiVersionsRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<ApiVersionsRequest> {
        if version < 3 {
            return Ok(ApiVersionsRequest::default());
        }
        let name = r.string(true, "client_software_name")?;
        let ver = r.string(true, "client_software_version")?;
        r.skip_tagged_fields()?;
        Ok(ApiVersionsRequest {
            client_software_name: Some(name),
            client_software_version: Some(ver),
        })
    }
}

/// Encodes the response: our supported ranges, whatever the error. For an
/// unsupported request version the answer is encoded as v0, which every
/// client can read.
pub fn encode_response(w: &mut Writer, version: i16, error: ErrorCode) {
    let flexible = version >= 3;
    w.i16(error.code());
    w.array_len(flexible, Some(SUPPORTED.len()));
    for s in SUPPORTED {
        w.i16(s.code);
        w.i16(s.min);
        w.i16(s.max);
        w.empty_tagged_fields_if(flexible);
    }
    if version >= 1 {
        w.i32(0);
    }
    w.empty_tagged_fields_if(flexible);
}
