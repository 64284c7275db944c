//! SASL listeners (issue #21): SASL_PLAINTEXT and SASL_SSL on a standalone
//! broker, with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, users set with
//! `ferrite users` (AlterUserScramCredentials). Real clients (Debian's
//! kcat, confluent-kafka, kafka-python) authenticate; bad input (a wrong
//! password, an unknown user, a replayed SCRAM proof, requests out of
//! order, a huge token) gets Kafka's error or a closed connection, and is
//! counted.

mod common;

use std::process::Command;

use base64::Engine;
use bytes::Bytes;
use common::secure::{kcat, lines, metric_with, python, Secured};
use common::{Broker, Client};
use ferrite_testkit::certs::TlsFiles;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A broker with PLAINTEXT (its `port`), SASL_PLAINTEXT and SASL_SSL
/// listeners, metrics; user alice (password alice-secret) added with the
/// CLI. Returns the SASL_PLAINTEXT, SASL_SSL and metrics ports.
struct Sasl {
    broker: Broker,
    plain: u16,
    ssl: u16,
    metrics: u16,
}

fn start(tls: &TlsFiles, extra: &[&str]) -> Sasl {
    let (plain, ssl, metrics) = (
        ferrite_testkit::free_port(),
        ferrite_testkit::free_port(),
        ferrite_testkit::free_port(),
    );
    let mut overrides = vec![
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{{PORT}},SASL_PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{ssl}"
        ),
        format!("ssl.keystore.location={}", tls.keystore.display()),
        format!("ferrite.metrics.listen=127.0.0.1:{metrics}"),
    ];
    overrides.extend(extra.iter().map(|e| e.to_string()));
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let broker = Broker::start(&overrides);
    let s = Sasl {
        broker,
        plain,
        ssl,
        metrics,
    };
    let out = users(&s.broker, &["add", "--user", "alice", "--password", "alice-secret"]);
    assert!(out.contains("Set the SCRAM credentials of alice"), "{out}");
    s
}

/// `ferrite users ARGS --bootstrap` against the PLAINTEXT listener; its stdout.
fn users(b: &Broker, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .arg("users")
        .args(args)
        .args(["--bootstrap", &b.bootstrap()])
        .output()
        .expect("ferrite users");
    assert!(
        out.status.success(),
        "ferrite users {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn alice(mechanism: &'static str) -> Secured<'static> {
    Secured {
        sasl: Some((mechanism, "alice", "alice-secret")),
        ..Secured::default()
    }
}

#[test]
fn kcat_authenticates_with_plain_and_both_scram_mechanisms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let mut s = start(&tls, &[]);
    let listed = users(&s.broker, &["list"]);
    assert_eq!(
        listed.trim(),
        "alice: SCRAM-SHA-256 (iterations 8192), SCRAM-SHA-512 (iterations 8192)"
    );
    let mut sent = String::new();
    for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let batch = format!("{m}\n{}", lines(200));
        let (ok, _, err) = kcat(&alice(m), s.plain, &["-P", "-t", "sasl"], batch.as_bytes());
        assert!(ok, "kcat -P with {m}: {err}");
        sent.push_str(&batch);
    }
    let over_tls = Secured {
        ca: Some(&tls.ca),
        ..alice("SCRAM-SHA-512")
    };
    let (ok, got, err) = kcat(
        &over_tls,
        s.ssl,
        &["-C", "-t", "sasl", "-o", "beginning", "-e", "-q"],
        b"",
    );
    assert!(ok, "kcat -C over SASL_SSL: {err}");
    assert!(got == sent, "read back {} bytes of {}", got.len(), sent.len());
    let (ok, listed, _) = kcat(&over_tls, s.ssl, &["-L"], b"");
    assert!(
        ok && listed.contains(&format!("broker 0 at 127.0.0.1:{}", s.ssl)),
        "{listed}"
    );
    let ok = metric_with(s.metrics, "ferrite_sasl_authentications_total", "outcome=\"ok\"").unwrap_or(0.0);
    assert!(ok >= 5.0, "{ok} authentications counted");

    // The users outlive a restart (the embedded metadata keeps them).
    s.broker.stop();
    s.broker.spawn();
    let (ok, _, err) = kcat(&alice("SCRAM-SHA-256"), s.plain, &["-L"], b"");
    assert!(ok, "after a restart: {err}");
    // Removed, alice is refused.
    let out = users(&s.broker, &["remove", "--user", "alice"]);
    assert!(out.contains("Removed"), "{out}");
    for m in ["PLAIN", "SCRAM-SHA-512"] {
        let (ok, _, _) = kcat(&alice(m), s.plain, &["-L", "-m", "3"], b"");
        assert!(!ok, "a removed user authenticated with {m}");
    }
}

#[test]
fn python_clients_authenticate_with_scram_and_plain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let s = start(&tls, &[]);
    let ca = tls.ca.display().to_string();
    let over_tls = format!("127.0.0.1:{}", s.ssl);
    let in_clear = format!("127.0.0.1:{}", s.plain);
    python(&[
        &over_tls,
        "confluent",
        "--ca",
        &ca,
        "--sasl",
        "SCRAM-SHA-512:alice:alice-secret",
    ]);
    python(&[&in_clear, "kafka-python", "--sasl", "SCRAM-SHA-256:alice:alice-secret"]);
    python(&[
        &over_tls,
        "kafka-python",
        "--ca",
        &ca,
        "--sasl",
        "PLAIN:alice:alice-secret",
    ]);
}

fn handshake(c: &mut Client, mechanism: &str) -> (i16, Vec<String>) {
    let r = c.call(&SaslHandshakeRequest::default().with_mechanism(common::s(mechanism)), 1);
    (r.error_code, r.mechanisms.iter().map(|m| m.to_string()).collect())
}

fn authenticate(c: &mut Client, token: &[u8]) -> (i16, Option<String>, Vec<u8>) {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    let r = c.call(&req, 2);
    (
        r.error_code,
        r.error_message.map(|m| m.to_string()),
        r.auth_bytes.to_vec(),
    )
}

#[test]
fn bad_sasl_input_gets_kafkas_error_and_a_closed_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let s = start(&tls, &[]);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", s.plain).parse().expect("addr");

    // A wrong password and an unknown user: the same answer (no way to
    // tell which users exist), SASL_AUTHENTICATION_FAILED, then closed.
    let mut messages = Vec::new();
    for token in [&b"\0alice\0wrong"[..], b"\0nobody\0alice-secret"] {
        let mut c = Client::connect(addr);
        c.call(&ApiVersionsRequest::default(), 0);
        assert_eq!(handshake(&mut c, "PLAIN").0, 0);
        let (code, message, _) = authenticate(&mut c, token);
        assert_eq!(code, 58, "SASL_AUTHENTICATION_FAILED");
        messages.push(message);
        assert!(c.is_closed(), "closed after a failed authentication");
    }
    assert_eq!(
        messages[0], messages[1],
        "a wrong password and an unknown user read alike"
    );

    // SaslAuthenticate before SaslHandshake: ILLEGAL_SASL_STATE.
    let mut c = Client::connect(addr);
    assert_eq!(authenticate(&mut c, b"\0alice\0alice-secret").0, 34);
    assert!(c.is_closed());
    // A mechanism not offered: UNSUPPORTED_SASL_MECHANISM, with those offered.
    let mut c = Client::connect(addr);
    let (code, offered) = handshake(&mut c, "GSSAPI");
    assert_eq!(code, 33);
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(c.is_closed());
    // Any other request before authentication: closed, unanswered.
    let mut c = Client::connect(addr);
    c.send(&MetadataRequest::default(), 4);
    assert!(
        c.read_frame().is_none(),
        "a Metadata request before authentication was answered"
    );
    // A token over sasl.server.max.receive.size (512 KiB): closed.
    let mut c = Client::connect(addr);
    assert_eq!(handshake(&mut c, "SCRAM-SHA-512").0, 0);
    let huge = c.frame(
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(vec![b'n'; 1 << 20])),
        2,
    );
    // The broker may close on the size alone, before all of it is sent.
    let _ = c.send_raw(&huge);
    assert!(c.read_frame().is_none(), "a 1 MiB token was taken");

    // A request sent right behind the last SaslAuthenticate, in the same
    // write, is served once the client is authenticated.
    let mut c = Client::connect(addr);
    assert_eq!(handshake(&mut c, "PLAIN").0, 0);
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret"));
    let mut both = c.frame(&auth, 2);
    both.extend(c.frame(&MetadataRequest::default(), 4));
    c.send_raw(&both).expect("send");
    let (first, second) = (c.read_frame(), c.read_frame());
    assert!(first.is_some() && second.is_some(), "both answered");

    let failed = metric_with(s.metrics, "ferrite_sasl_authentications_total", "outcome=\"failed\"").unwrap_or(0.0);
    assert!(failed >= 6.0, "{failed} failures counted");
    // The broker serves on.
    let (ok, _, err) = kcat(&alice("SCRAM-SHA-512"), s.plain, &["-L"], b"");
    assert!(ok, "{err}");
}

/// The client's side of SCRAM-SHA-256 for alice: (client-first, the
/// client-final for a server-first).
fn scram_client_final(server_first: &str, client_first_bare: &str, password: &str) -> String {
    use ring::{digest, hmac, pbkdf2};
    let attr = |k: &str| {
        server_first
            .split(',')
            .find_map(|a| a.strip_prefix(&format!("{k}=")))
            .expect("attribute")
            .to_string()
    };
    let (nonce, salt, iterations) = (
        attr("r"),
        B64.decode(attr("s")).expect("salt"),
        attr("i").parse().expect("i"),
    );
    let mut salted = [0u8; 32];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        &salt,
        password.as_bytes(),
        &mut salted,
    );
    let key = |k: &[u8], d: &[u8]| hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, k), d).as_ref().to_vec();
    let client_key = key(&salted, b"Client Key");
    let stored = digest::digest(&digest::SHA256, &client_key);
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = key(stored.as_ref(), auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
    format!("{without_proof},p={}", B64.encode(proof))
}

#[test]
fn a_replayed_scram_proof_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let s = start(&tls, &[]);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", s.plain).parse().expect("addr");
    let bare = "n=alice,r=fixed-client-nonce";
    // A genuine exchange, recorded.
    let mut c = Client::connect(addr);
    assert_eq!(handshake(&mut c, "SCRAM-SHA-256").0, 0);
    let (code, _, server_first) = authenticate(&mut c, format!("n,,{bare}").as_bytes());
    assert_eq!(code, 0);
    let server_first = String::from_utf8(server_first).expect("utf-8");
    let recorded = scram_client_final(&server_first, bare, "alice-secret");
    let (code, _, server_final) = authenticate(&mut c, recorded.as_bytes());
    assert_eq!(code, 0, "the genuine exchange authenticates");
    assert!(server_final.starts_with(b"v="));
    // The recorded final message on a new connection, same client nonce.
    let mut c = Client::connect(addr);
    assert_eq!(handshake(&mut c, "SCRAM-SHA-256").0, 0);
    let (code, _, second_first) = authenticate(&mut c, format!("n,,{bare}").as_bytes());
    assert_eq!(code, 0);
    assert_ne!(second_first, server_first.as_bytes(), "a fresh server nonce");
    let (code, _, _) = authenticate(&mut c, recorded.as_bytes());
    assert_eq!(code, 58, "the replayed proof was taken");
    assert!(c.is_closed());
}

/// A listener without SASL answers SASL requests ILLEGAL_SASL_STATE and
/// serves on; SCRAM credentials that cannot be stored are refused with
/// Kafka's errors.
#[test]
fn sasl_requests_elsewhere_and_bad_credentials_get_kafkas_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = TlsFiles::write(dir.path());
    let s = start(&tls, &[]);
    let mut c = Client::connect(s.broker.addr());
    assert_eq!(handshake(&mut c, "PLAIN").0, 34);
    assert_eq!(authenticate(&mut c, b"\0alice\0alice-secret").0, 34);
    let meta = c.call(&MetadataRequest::default(), 4);
    assert_eq!(meta.brokers.len(), 1, "the connection serves on");

    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    let upsert = |name: &str, mechanism: i8, iterations: i32| {
        ScramCredentialUpsertion::default()
            .with_name(common::s(name))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from(vec![1u8; 32]))
    };
    let req = AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![upsert("few", 1, 100), upsert("odd", 3, 4096), upsert("", 1, 4096)])
        .with_deletions(vec![ScramCredentialDeletion::default()
            .with_name(common::s("ghost"))
            .with_mechanism(1)]);
    let r = c.call(&req, 0);
    let mut results: Vec<(String, i16)> = r.results.iter().map(|x| (x.user.to_string(), x.error_code)).collect();
    results.sort();
    assert_eq!(
        results,
        [
            ("".to_string(), 93),
            ("few".into(), 93),
            ("ghost".into(), 91),
            ("odd".into(), 33)
        ],
        "UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND, UNSUPPORTED_SASL_MECHANISM"
    );
    assert_eq!(users(&s.broker, &["list"]).lines().count(), 1, "only alice");
}
