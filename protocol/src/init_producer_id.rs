//! InitProducerId (key 22), v0-4 (flexible from v2): a producer id and
//! epoch for an idempotent producer. Transactions are not served.
//!
//! Request: transactional_id nullable string, transaction_timeout_ms int32,
//! producer_id int64 (v3+), producer_epoch int16 (v3+).
//! Response: throttle_time_ms int32, error_code int16, producer_id int64,
//! producer_epoch int16.

use ferrite_ids::ProducerId;

use super::wire::{Reader, WireResult, Writer};

pub const API_KEY: i16 = 22;
pub const VERSION_MAX: i16 = 4;
pub const FLEXIBLE_FROM: i16 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub error_code: i16,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
}

fn flexible(version: i16) -> bool {
    version >= FLEXIBLE_FROM
}

impl InitProducerIdRequest {
    pub fn decode(r: &mut Reader, version: i16) -> WireResult<InitProducerIdRequest> {
        let f = flexible(version);
        let transactional_id = r.nullable_string(f, "transactional_id")?;
        let transaction_timeout_ms = r.i32("transaction_timeout_ms")?;
        let (producer_id, producer_epoch) = if version >= 3 {
            (ProducerId(r.i64("producer_id")?), r.i16("producer_epoch")?)
        } else {
            (ProducerId::NONE, -1)
        };
        r.tagged_fields_if(f)?;
        Ok(InitProducerIdRequest {
            transactional_id,
            transaction_timeout_ms,
            producer_id,
            producer_epoch,
        })
    }

    pub fn encode(&self, w: &mut Writer, version: i16) {
        let f = flexible(version);
        w.nullable_string(f, self.transactional_id.as_deref());
        w.i32(self.transaction_timeout_ms);
        if version >= 3 {
            w.i64(self.producer_id.0);
            w.i16(self.producer_epoch);
        }
        w.empty_tagged_fields_if(f);
    }
}

impl InitProducerIdResponse {
    pub fn encode(&self, w: &mut Writer, version: i16) {
        w.i32(0);
        w.i16(self.error_code);
        w.i64(self.producer_id.0);
        w.i16(self.producer_epoch);
        w.empty_tagged_fields_if(flexible(version));
    }

    pub fn decode(r: &mut Reader, version: i16) -> WireResult<InitProducerIdResponse> {
        r.i32("throttle_time_ms")?;
        let error_code = r.i16("error_code")?;
        let producer_id = ProducerId(r.i64("producer_id")?);
        let producer_epoch = r.i16("producer_epoch")?;
        r.tagged_fields_if(flexible(version))?;
        Ok(InitProducerIdResponse {
            error_code,
            producer_id,
            producer_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    #[test]
    fn round_trips_at_every_version() {
        for v in 0..=VERSION_MAX {
            let req = InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: 60_000,
                producer_id: if v >= 3 { ProducerId(7) } else { ProducerId::NONE },
                producer_epoch: if v >= 3 { 2 } else { -1 },
            };
            let bytes = round_trip(&req, |x, w| x.encode(w, v), |r| InitProducerIdRequest::decode(r, v));
            every_prefix_fails(&bytes, |r| InitProducerIdRequest::decode(r, v));
            let resp = InitProducerIdResponse {
                error_code: 0,
                producer_id: ProducerId(1000),
                producer_epoch: 0,
            };
            round_trip(&resp, |x, w| x.encode(w, v), |r| InitProducerIdResponse::decode(r, v));
        }
    }
}
