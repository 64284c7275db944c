//! The `authorized_operations` bit fields of Metadata, DescribeCluster and
//! DescribeGroups (KIP-430): bit `n` set when the principal may perform ACL
//! operation `n` on the resource. Ferrite has no authorizer yet, so every
//! principal may perform every operation that applies to the resource, as
//! Kafka answers without an authorizer. A field not asked for is
//! [`OMITTED`].

/// Not asked for (or a version without the field).
pub const OMITTED: i32 = i32::MIN;

/// Kafka's `AclOperation` codes.
const READ: u32 = 3;
const WRITE: u32 = 4;
const CREATE: u32 = 5;
const DELETE: u32 = 6;
const ALTER: u32 = 7;
const DESCRIBE: u32 = 8;
const CLUSTER_ACTION: u32 = 9;
const DESCRIBE_CONFIGS: u32 = 10;
const ALTER_CONFIGS: u32 = 11;
const IDEMPOTENT_WRITE: u32 = 12;

const fn bits(ops: &[u32]) -> i32 {
    let mut out = 0i32;
    let mut i = 0;
    while i < ops.len() {
        out |= 1 << ops[i];
        i += 1;
    }
    out
}

/// Every operation that applies to a topic.
pub const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);
/// Every operation that applies to a group.
pub const GROUP: i32 = bits(&[READ, DESCRIBE, DELETE]);
/// Every operation that applies to the cluster.
pub const CLUSTER: i32 = bits(&[
    CREATE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    ALTER,
    DESCRIBE,
]);

/// `ops` when asked for, else [`OMITTED`].
pub fn if_asked(asked: bool, ops: i32) -> i32 {
    if asked {
        ops
    } else {
        OMITTED
    }
}

const _: () = assert!(
    TOPIC == 3576,
    "READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS"
);
const _: () = assert!(GROUP == 328, "READ DELETE DESCRIBE");
const _: () = assert!(
    CLUSTER == 8096,
    "CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE"
);
