//! Partition replica state: leader/follower roles, the ISR, log end offsets
//! and the high watermark, leader epochs, and produce requests waiting for
//! acks — as state machines without I/O (events in, actions out).
//!
//! Not built yet: this crate is the subject of the replication issue. It
//! depends only on `ferrite-engine`.
