//! Kafka's rules for topic names.

use crate::error::{ControllerError, Result};

/// Longest topic name (Kafka: 249, so that `<topic>-<partition>` directory
/// names stay within 255 bytes).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Checks a topic name: 1 to 249 characters of `[a-zA-Z0-9._-]`, and not
/// `.` or `..`.
pub fn validate_name(topic: &str) -> Result<()> {
    let bad = |reason| {
        Err(ControllerError::InvalidTopic {
            topic: topic.to_string(),
            reason,
        })
    };
    if topic.is_empty() {
        return bad("empty");
    }
    if topic == "." || topic == ".." {
        return bad("'.' and '..' are not allowed");
    }
    if topic.len() > TOPIC_NAME_BYTES_MAX {
        return bad("longer than 249 characters");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafka_rules() {
        for ok in ["a", "my-topic", "x.y_z", &"t".repeat(249)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a b", "é", "a/b", &"t".repeat(250)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
