//! One connection's authentication on a SASL listener, in Kafka's order:
//! SaslHandshake names a mechanism the listener offers, then
//! SaslAuthenticate carries the mechanism's messages until it says who
//! the client is. Anything out of that order is an illegal state, and the
//! broker closes the connection after answering it (as Kafka does); so it
//! does after a failed authentication.

use crate::credential::ScramCredential;
use crate::mechanism::Mechanism;
use crate::scram::{ScramServer, Step};
use crate::{plain, Principal, SecurityError};

/// Where a user's credentials are looked up.
pub trait Credentials {
    fn scram(&self, user: &str, mechanism: Mechanism) -> Option<ScramCredential>;
}

/// One connection's SASL state.
pub struct SaslSession {
    offered: Vec<Mechanism>,
    state: State,
}

enum State {
    AwaitHandshake,
    Handshaken(Mechanism),
    Scram(ScramServer),
    Authenticated(Principal),
    Over,
}

/// What a SaslAuthenticate is answered with.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The mechanism's next challenge.
    Challenge(Vec<u8>),
    /// Authenticated as `principal`; `reply` is the mechanism's last
    /// message (empty for PLAIN).
    Authenticated { principal: Principal, reply: Vec<u8> },
}

impl SaslSession {
    pub fn new(offered: Vec<Mechanism>) -> SaslSession {
        SaslSession {
            offered,
            state: State::AwaitHandshake,
        }
    }

    /// The mechanisms offered, by name (SaslHandshake's answer).
    pub fn offered(&self) -> Vec<&'static str> {
        self.offered.iter().map(|m| m.name()).collect()
    }

    /// Who the client is, once authenticated.
    pub fn principal(&self) -> Option<&Principal> {
        match &self.state {
            State::Authenticated(p) => Some(p),
            _ => None,
        }
    }

    /// A SaslHandshake naming `mechanism`.
    pub fn handshake(&mut self, mechanism: &str) -> Result<Mechanism, SecurityError> {
        if !matches!(self.state, State::AwaitHandshake) {
            self.state = State::Over;
            return Err(SecurityError::IllegalState {
                reason: "a SaslHandshake after the first".into(),
            });
        }
        let offered = Mechanism::parse(mechanism).filter(|m| self.offered.contains(m));
        let Some(m) = offered else {
            self.state = State::Over;
            return Err(SecurityError::UnsupportedMechanism {
                name: mechanism.chars().take(64).collect(),
            });
        };
        self.state = State::Handshaken(m);
        Ok(m)
    }

    /// A SaslAuthenticate carrying `token`.
    pub fn authenticate(&mut self, token: &[u8], credentials: &dyn Credentials) -> Result<Answer, SecurityError> {
        let outcome = match std::mem::replace(&mut self.state, State::Over) {
            State::AwaitHandshake => Err(SecurityError::IllegalState {
                reason: "SaslAuthenticate before SaslHandshake".into(),
            }),
            State::Handshaken(Mechanism::Plain) => {
                plain::authenticate(token, &|u, m| credentials.scram(u, m)).map(|user| Answer::Authenticated {
                    principal: Principal::user(&user),
                    reply: Vec::new(),
                })
            }
            State::Handshaken(m) => self.scram_step(ScramServer::new(m), m, token, credentials),
            State::Scram(server) => {
                let m = server.mechanism();
                self.scram_step(server, m, token, credentials)
            }
            State::Authenticated(_) | State::Over => Err(SecurityError::IllegalState {
                reason: "SaslAuthenticate after the exchange ended".into(),
            }),
        };
        if let Ok(Answer::Authenticated { principal, .. }) = &outcome {
            self.state = State::Authenticated(principal.clone());
        }
        outcome
    }

    fn scram_step(
        &mut self,
        mut server: ScramServer,
        m: Mechanism,
        token: &[u8],
        credentials: &dyn Credentials,
    ) -> Result<Answer, SecurityError> {
        match server.step(token, &|u| credentials.scram(u, m))? {
            Step::Challenge(c) => {
                self.state = State::Scram(server);
                Ok(Answer::Challenge(c))
            }
            Step::Done { user, reply } => Ok(Answer::Authenticated {
                principal: Principal::user(&user),
                reply,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct One(ScramCredential);
    impl Credentials for One {
        fn scram(&self, user: &str, m: Mechanism) -> Option<ScramCredential> {
            (user == "alice" && m == Mechanism::ScramSha512).then(|| self.0.clone())
        }
    }

    fn alice() -> One {
        One(ScramCredential::from_password(Mechanism::ScramSha512, b"secret", b"NaCl", 4096).unwrap())
    }

    #[test]
    fn the_order_is_handshake_then_authenticate() {
        let all = Mechanism::ALL.to_vec();
        let mut s = SaslSession::new(all.clone());
        assert!(matches!(
            s.authenticate(b"\0alice\0secret", &alice()),
            Err(SecurityError::IllegalState { .. })
        ));
        let mut s = SaslSession::new(vec![Mechanism::ScramSha512]);
        assert!(matches!(
            s.handshake("PLAIN"),
            Err(SecurityError::UnsupportedMechanism { .. })
        ));
        assert!(matches!(
            s.handshake("SCRAM-SHA-512"),
            Err(SecurityError::IllegalState { .. })
        ));
        let mut s = SaslSession::new(all.clone());
        s.handshake("PLAIN").unwrap();
        assert!(matches!(s.handshake("PLAIN"), Err(SecurityError::IllegalState { .. })));
        let mut s = SaslSession::new(all);
        s.handshake("PLAIN").unwrap();
        let answer = s.authenticate(b"\0alice\0secret", &alice()).unwrap();
        assert_eq!(
            answer,
            Answer::Authenticated {
                principal: Principal::user("alice"),
                reply: vec![]
            }
        );
        assert_eq!(s.principal(), Some(&Principal::user("alice")));
        assert!(
            s.authenticate(b"\0alice\0secret", &alice()).is_err(),
            "nothing after the end"
        );
    }

    #[test]
    fn a_failed_exchange_ends_the_session() {
        let mut s = SaslSession::new(Mechanism::ALL.to_vec());
        s.handshake("PLAIN").unwrap();
        assert!(s.authenticate(b"\0alice\0wrong", &alice()).is_err());
        assert!(
            s.authenticate(b"\0alice\0secret", &alice()).is_err(),
            "no second try on one connection"
        );
        assert_eq!(s.principal(), None);
    }
}
