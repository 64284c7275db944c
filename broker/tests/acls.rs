//! ACLs (issue #21) on a standalone broker with an authorizer
//! (`authorizer.class.name`): a table of APIs × none / allow / deny /
//! prefix / super user driven by confluent-kafka (`tests/python/acls.py`),
//! `ferrite acls` in the shape of `kafka-acls.sh`, and the broker-only
//! APIs refused to an ordinary client.

mod common;

use std::process::Command;

use bytes::Bytes;
use common::{Broker, Client};
use kafka_protocol::messages::{DescribeAclsRequest, SaslAuthenticateRequest, SaslHandshakeRequest};

/// A broker checking ACLs: PLAINTEXT (its `port`; clients there are
/// User:ANONYMOUS, a super user) and SASL_PLAINTEXT (the returned port),
/// with user alice.
fn start() -> (Broker, u16) {
    let sasl = ferrite_testkit::free_port();
    let listeners = format!("listeners=PLAINTEXT://127.0.0.1:{{PORT}},SASL_PLAINTEXT://127.0.0.1:{sasl}");
    let b = Broker::start(&[
        &listeners,
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:ANONYMOUS",
    ]);
    ferrite(&b, &["users", "add", "--user", "alice", "--password", "alice-secret"]);
    (b, sasl)
}

/// `ferrite ARGS --bootstrap` on the PLAINTEXT listener; its stdout.
fn ferrite(b: &Broker, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(args)
        .args(["--bootstrap", &b.bootstrap()])
        .output()
        .expect("ferrite");
    assert!(
        out.status.success(),
        "ferrite {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_api_checks_what_kafka_checks_for_it() {
    let (b, sasl) = start();
    let python = std::env::var("FERRITE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/acls.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(b.bootstrap())
        .arg(format!("127.0.0.1:{sasl}"))
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, or set FERRITE_PYTHON)"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ferrite_acls_adds_lists_and_removes_like_kafka_acls() {
    let (b, _) = start();
    let added = ferrite(
        &b,
        &[
            "acls",
            "add",
            "--allow-principal",
            "User:bob",
            "--consumer",
            "--topic",
            "orders",
            "--group",
            "billing",
        ],
    );
    assert_eq!(
        added.lines().count(),
        3,
        "Read and Describe on the topic, Read on the group: {added}"
    );
    ferrite(
        &b,
        &[
            "acls",
            "add",
            "--deny-principal",
            "User:*",
            "--operation",
            "Write",
            "--topic",
            "pay",
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    let all = ferrite(&b, &["acls", "list"]);
    assert_eq!(all.lines().count(), 4, "{all}");
    assert!(all.contains("Topic:PREFIXED:pay User:* Deny Write from *"), "{all}");
    let for_orders = ferrite(&b, &["acls", "list", "--topic", "orders"]);
    assert_eq!(for_orders.lines().count(), 2, "{for_orders}");
    let matching = ferrite(&b, &["acls", "list", "--topic", "payments"]);
    assert!(
        matching.contains("PREFIXED:pay"),
        "a prefix that applies to the topic is listed: {matching}"
    );
    let removed = ferrite(
        &b,
        &[
            "acls",
            "remove",
            "--allow-principal",
            "User:bob",
            "--consumer",
            "--topic",
            "orders",
            "--group",
            "billing",
        ],
    );
    assert_eq!(removed.lines().count(), 3, "{removed}");
    assert_eq!(ferrite(&b, &["acls", "list"]).lines().count(), 1);
}

/// A broker-only API (ControlledShutdown) from an ordinary client is
/// refused CLUSTER_AUTHORIZATION_FAILED; ACL changes from her too.
#[test]
fn broker_only_apis_are_refused_to_an_ordinary_client() {
    let (_b, sasl) = start();
    let mut c = Client::connect(format!("127.0.0.1:{sasl}").parse().expect("addr"));
    let h = c.call(&SaslHandshakeRequest::default().with_mechanism(common::s("PLAIN")), 1);
    assert_eq!(h.error_code, 0);
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret"));
    assert_eq!(c.call(&auth, 2).error_code, 0);
    // ControlledShutdown v3 (flexible): broker_id 0, broker_epoch -1.
    let mut frame = vec![0, 7, 0, 3, 0, 0, 0, 99, 0, 4];
    frame.extend_from_slice(b"test");
    frame.push(0);
    frame.extend_from_slice(&0i32.to_be_bytes());
    frame.extend_from_slice(&(-1i64).to_be_bytes());
    frame.push(0);
    let mut sized = (frame.len() as i32).to_be_bytes().to_vec();
    sized.extend_from_slice(&frame);
    c.send_raw(&sized).expect("send");
    let answer = c.read_frame().expect("an answer");
    assert_eq!(&answer[..4], &99i32.to_be_bytes(), "its correlation id");
    let error = i16::from_be_bytes([answer[5], answer[6]]);
    assert_eq!(error, 31, "CLUSTER_AUTHORIZATION_FAILED");
    // DescribeAcls without Describe on the cluster (librdkafka drops this
    // code, so the Python table cannot see it).
    let describe = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    assert_eq!(c.call(&describe, 3).error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
}
