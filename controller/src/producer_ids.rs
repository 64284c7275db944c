//! Blocks of producer ids, reserved cluster-wide so that no two brokers
//! hand out the same id (InitProducerId). A broker reserves
//! [`BLOCK_SIZE`] ids at a time: in ZooKeeper by a conditional write of
//! `/latest_producer_id_block`, in the embedded store in the file
//! `producer-id-block` next to `metadata.json`. Both hold the last block
//! handed out as JSON, `{"version":1,"broker":B,"block_start":S,"block_end":E}`
//! (the end inclusive); the next block starts at `E + 1`.

use serde::{Deserialize, Serialize};

use crate::metadata::BrokerId;

pub const BLOCK_SIZE: i64 = 1000;
const VERSION: i32 = 1;

/// A run of producer ids, `start..=end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlock {
    pub version: i32,
    pub broker: i32,
    pub block_start: i64,
    pub block_end: i64,
}

impl ProducerIdBlock {
    /// The block after `previous` (the first block when there is none).
    pub fn after(previous: Option<&ProducerIdBlock>, broker: BrokerId) -> ProducerIdBlock {
        let start = previous.map(|p| p.block_end.saturating_add(1)).unwrap_or(0);
        ProducerIdBlock {
            version: VERSION,
            broker: broker.0,
            block_start: start,
            block_end: start.saturating_add(BLOCK_SIZE - 1),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<ProducerIdBlock, String> {
        let b: ProducerIdBlock = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if b.block_start < 0 || b.block_end < b.block_start {
            return Err(format!("bad block {}..={}", b.block_start, b.block_end));
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_follow_each_other_and_round_trip() {
        let first = ProducerIdBlock::after(None, BrokerId(1));
        assert_eq!((first.block_start, first.block_end), (0, BLOCK_SIZE - 1));
        let second = ProducerIdBlock::after(Some(&first), BrokerId(2));
        assert_eq!(second.block_start, BLOCK_SIZE);
        assert_eq!(ProducerIdBlock::decode(&second.encode()), Ok(second));
        assert!(ProducerIdBlock::decode(b"{\"version\":1,\"broker\":1,\"block_start\":5,\"block_end\":2}").is_err());
        assert!(ProducerIdBlock::decode(b"junk").is_err());
    }
}
