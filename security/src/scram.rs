//! The server's side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC
//! 7677), as Kafka runs it inside SaslAuthenticate: two round trips, no
//! channel binding.
//!
//! ```text
//! client-first   n,[a=<authzid>],n=<user>,r=<client nonce>[,<ext>]
//! server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
//! client-final   c=<base64 of the gs2 header>,r=<nonce>,p=<base64 proof>
//! server-final   v=<base64 server signature>
//! ```
//!
//! The proof is checked against the stored key: `ClientKey = proof XOR
//! HMAC(StoredKey, AuthMessage)` must hash to `StoredKey`, where
//! `AuthMessage` is the client-first message without its gs2 header, the
//! server-first message and the client-final message without its proof,
//! joined by commas. The server's nonce is fresh for every exchange, so a
//! proof recorded from one exchange proves nothing in another. The final
//! message's nonce must end with the combined one (Kafka's check: the
//! librdkafka of Debian's kcat repeats its own nonce in front of it).
//!
//! Refused: channel binding (`p=…`), an authorization id other than the
//! user, the reserved `m=` attribute, delegation tokens (`tokenauth=true`,
//! not built), a user name with a bad `=` escape.

use base64::Engine;
use ring::digest;

use crate::credential::{hash_of, hmac, same, ScramCredential};
use crate::mechanism::Mechanism;
use crate::SecurityError;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// Random bytes in the server's nonce (base64: 32 characters).
const SERVER_NONCE_BYTES: usize = 24;

/// One exchange, server side.
pub struct ScramServer {
    mechanism: Mechanism,
    state: State,
}

enum State {
    First,
    Final(Exchange),
    Done,
}

/// What the first message left for the second.
struct Exchange {
    user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

/// What the server answers a client's message with.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The next challenge; the exchange goes on.
    Challenge(Vec<u8>),
    /// The client is `user`; `reply` is the server's final message.
    Done { user: String, reply: Vec<u8> },
}

fn malformed(m: Mechanism, reason: impl Into<String>) -> SecurityError {
    SecurityError::Malformed {
        mechanism: m.name(),
        reason: reason.into(),
    }
}

impl ScramServer {
    pub fn new(mechanism: Mechanism) -> ScramServer {
        assert!(mechanism != Mechanism::Plain, "SCRAM is not PLAIN");
        ScramServer {
            mechanism,
            state: State::First,
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Takes the client's next message; `lookup` gives a user's credential
    /// for this mechanism.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
    ) -> Result<Step, SecurityError> {
        // Only the first message is answered with a nonce of the server's.
        let nonce = match self.state {
            State::First => {
                let mut nonce = [0u8; SERVER_NONCE_BYTES];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
                    .map_err(|_| SecurityError::Random)?;
                B64.encode(nonce)
            }
            _ => String::new(),
        };
        self.step_with_nonce(message, lookup, &nonce)
    }

    fn step_with_nonce(
        &mut self,
        message: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<Step, SecurityError> {
        let m = self.mechanism;
        let text = std::str::from_utf8(message).map_err(|_| malformed(m, "not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => {
                let exchange = self.first(text, lookup, server_nonce)?;
                let challenge = exchange.server_first.clone().into_bytes();
                self.state = State::Final(exchange);
                Ok(Step::Challenge(challenge))
            }
            State::Final(exchange) => self.last(text, exchange),
            State::Done => Err(SecurityError::IllegalState {
                reason: "the SCRAM exchange is over".into(),
            }),
        }
    }

    fn first(
        &self,
        text: &str,
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<Exchange, SecurityError> {
        let m = self.mechanism;
        let mut parts = text.splitn(3, ',');
        let (flag, authzid, bare) = match (parts.next(), parts.next(), parts.next()) {
            (Some(f), Some(a), Some(b)) => (f, a, b),
            _ => return Err(malformed(m, "expected gs2 header and client-first-message-bare")),
        };
        match flag {
            "n" | "y" => {}
            f if f.starts_with("p=") => return Err(malformed(m, "channel binding is not offered")),
            f => return Err(malformed(m, format!("gs2 flag '{}'", shown(f)))),
        }
        let mut user = None;
        let mut client_nonce = None;
        for (i, attr) in bare.split(',').enumerate() {
            match (i, attr.split_once('=')) {
                (0, Some(("m", _))) => return Err(malformed(m, "mandatory extensions are not offered")),
                (0, Some(("n", name))) => user = Some(unescape(m, name)?),
                (1, Some(("r", nonce))) if !nonce.is_empty() && nonce.bytes().all(printable) => {
                    client_nonce = Some(nonce.to_string())
                }
                (_, Some(("tokenauth", _))) => {
                    return Err(malformed(m, "delegation tokens are not built"));
                }
                (i, _) if i >= 2 => {} // other extensions: ignored, as RFC 5802 asks
                _ => return Err(malformed(m, format!("attribute '{}'", shown(attr)))),
            }
        }
        let (Some(user), Some(client_nonce)) = (user, client_nonce) else {
            return Err(malformed(m, "no user or no nonce"));
        };
        match authzid.strip_prefix("a=") {
            None if authzid.is_empty() => {}
            Some(a) if unescape(m, a)? == user => {}
            _ => return Err(SecurityError::auth("an authorization id other than the user")),
        }
        // An unknown user is challenged as a known one would be (a salt
        // that stays the same for the name, the usual iterations) and
        // fails at the proof: the answer must not tell which users exist.
        let credential = match lookup(&user) {
            Some(c) => c,
            None => unknown_user(&user)?,
        };
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        Ok(Exchange {
            user,
            gs2_header: format!("{flag},{authzid},"),
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
            credential,
        })
    }

    fn last(&self, text: &str, x: Exchange) -> Result<Step, SecurityError> {
        let m = self.mechanism;
        let hash = hash_of(m).ok_or_else(|| malformed(m, "not a SCRAM mechanism"))?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| malformed(m, "no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or_else(|| malformed(m, "no c="))?;
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or_else(|| malformed(m, "no r="))?;
        if B64.decode(binding).ok().as_deref() != Some(x.gs2_header.as_bytes()) {
            return Err(malformed(m, "the channel binding is not the gs2 header sent"));
        }
        // Ends with, as Kafka checks it: librdkafka sends its own nonce
        // again in front of the combined one. The server's fresh part is
        // in there either way, and the proof covers what was sent.
        if !nonce.ends_with(&x.nonce) {
            return Err(SecurityError::auth("the nonce is not this exchange's"));
        }
        let proof = B64.decode(proof).map_err(|_| malformed(m, "the proof is not base64"))?;
        let auth_message = format!("{},{},{}", x.client_first_bare, x.server_first, without_proof);
        let signature = hmac(hash.hmac, &x.credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(SecurityError::auth("a proof of the wrong length"));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !same(
            digest::digest(hash.digest, &client_key).as_ref(),
            &x.credential.stored_key,
        ) {
            return Err(SecurityError::auth("the proof does not check out (wrong password)"));
        }
        let server_signature = hmac(hash.hmac, &x.credential.server_key, auth_message.as_bytes());
        Ok(Step::Done {
            user: x.user,
            reply: format!("v={}", B64.encode(server_signature)).into_bytes(),
        })
    }
}

/// Client text in a message for the log: its first 64 characters.
fn shown(text: &str) -> String {
    text.chars().take(64).collect()
}

/// The credential an unknown user is challenged with: its salt an HMAC of
/// the name under a secret of this process, its stored key nothing a
/// proof can hash to (all zeros).
fn unknown_user(user: &str) -> Result<ScramCredential, SecurityError> {
    static SECRET: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    let secret = match SECRET.get() {
        Some(s) => s,
        None => {
            let mut s = [0u8; 32];
            ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut s)
                .map_err(|_| SecurityError::Random)?;
            SECRET.get_or_init(|| s)
        }
    };
    let salt = hmac(ring::hmac::HMAC_SHA256, secret, user.as_bytes());
    Ok(ScramCredential {
        salt: salt[..16].to_vec(),
        stored_key: vec![0u8; 64],
        server_key: vec![0u8; 64],
        iterations: 8192,
    })
}

/// RFC 5802's printable: 0x21–0x7E but ','.
fn printable(b: u8) -> bool {
    (0x21..=0x7e).contains(&b) && b != b','
}

/// A SCRAM user name: `=2C` is ',', `=3D` is '='; any other '=' is wrong.
fn unescape(m: Mechanism, name: &str) -> Result<String, SecurityError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed(m, "a bad '=' escape in the user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(malformed(m, "an empty user name"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rfc7677_credential() -> ScramCredential {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        ScramCredential::from_password(Mechanism::ScramSha256, b"pencil", &salt, 4096).unwrap()
    }

    /// RFC 7677 section 3's exchange, byte for byte.
    #[test]
    fn the_rfc_7677_exchange_is_answered_as_the_rfc_shows() {
        let cred = rfc7677_credential();
        let lookup = |u: &str| (u == "user").then(|| cred.clone());
        let mut s = ScramServer::new(Mechanism::ScramSha256);
        let first = s
            .step_with_nonce(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                &lookup,
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            )
            .unwrap();
        assert_eq!(
            first,
            Step::Challenge(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".to_vec()
            )
        );
        let last = s
            .step_with_nonce(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                &lookup,
                "unused",
            )
            .unwrap();
        assert_eq!(
            last,
            Step::Done {
                user: "user".into(),
                reply: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec()
            }
        );
        assert!(matches!(
            s.step(b"again", &lookup),
            Err(SecurityError::IllegalState { .. })
        ));
    }

    /// The same client-final message (a proof recorded from the RFC's
    /// exchange) in an exchange with another server nonce is refused; so
    /// are a wrong proof, an unknown user, and a proof for another user.
    #[test]
    fn a_replayed_or_wrong_proof_and_an_unknown_user_are_refused() {
        let cred = rfc7677_credential();
        let lookup = |u: &str| (u == "user").then(|| cred.clone());
        let replay = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let mut s = ScramServer::new(Mechanism::ScramSha256);
        s.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &lookup).unwrap();
        assert!(matches!(
            s.step(replay, &lookup),
            Err(SecurityError::Authentication { .. })
        ));

        let mut s = ScramServer::new(Mechanism::ScramSha256);
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        s.step_with_nonce(
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            &lookup,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        let wrong = format!("c=biws,r={nonce},p=eHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
        assert!(matches!(
            s.step(wrong.as_bytes(), &lookup),
            Err(SecurityError::Authentication { .. })
        ));

        let mut s = ScramServer::new(Mechanism::ScramSha256);
        let first = s.step(b"n,,n=nobody,r=abc", &lookup);
        let Ok(Step::Challenge(c)) = first else {
            panic!("an unknown user is challenged like a known one: {first:?}");
        };
        let mut again = ScramServer::new(Mechanism::ScramSha256);
        let Ok(Step::Challenge(c2)) = again.step(b"n,,n=nobody,r=abc", &lookup) else {
            panic!("challenged again");
        };
        let salt = |c: &[u8]| String::from_utf8_lossy(c).split(',').nth(1).map(String::from);
        assert_eq!(salt(&c), salt(&c2), "the same salt for the same unknown name");
        let final_msg = format!(
            "c=biws,r={},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            &String::from_utf8_lossy(&c)[2..].split(',').next().unwrap()
        );
        assert!(matches!(
            s.step(final_msg.as_bytes(), &lookup),
            Err(SecurityError::Authentication { .. })
        ));
        let mut s = ScramServer::new(Mechanism::ScramSha256);
        assert!(matches!(
            s.step(b"n,a=admin,n=user,r=abc", &lookup),
            Err(SecurityError::Authentication { .. })
        ));
    }

    #[test]
    fn malformed_messages_are_refused_without_panicking() {
        let cred = rfc7677_credential();
        let lookup = |u: &str| (u == "u,=").then(|| cred.clone());
        for bad in [
            &b""[..],
            b"n",
            b"n,,",
            b"p=tls-unique,,n=u,r=x",
            b"n,,m=ext,n=u,r=x",
            b"n,,n=u=2,r=x",
            b"n,,n=u,r=x,tokenauth=true",
            b"n,,n=,r=x",
            b"\xff\xfe",
        ] {
            let mut s = ScramServer::new(Mechanism::ScramSha512);
            assert!(s.step(bad, &lookup).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut s = ScramServer::new(Mechanism::ScramSha256);
        assert!(
            matches!(s.step(b"n,,n=u=2C=3D,r=x", &lookup), Ok(Step::Challenge(_))),
            "escaped names are unescaped"
        );
        assert!(s.step(b"c=biws,r=x", &lookup).is_err(), "no proof");
    }

    proptest::proptest! {
        /// Any bytes, as either message: an answer or an error, never a panic.
        #[test]
        fn any_bytes_are_answered_or_refused(first in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
                                             last in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let cred = rfc7677_credential();
            let lookup = |_: &str| Some(cred.clone());
            let mut s = ScramServer::new(Mechanism::ScramSha256);
            if s.step(&first, &lookup).is_ok() {
                let _ = s.step(&last, &lookup);
            }
        }
    }
}
