//! The SASL mechanisms offered, by their IANA names.

/// A SASL mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 3] = [Mechanism::Plain, Mechanism::ScramSha256, Mechanism::ScramSha512];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of `name` (exact, as Kafka compares them).
    pub fn parse(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The SCRAM mechanisms' wire numbers in Describe/AlterUserScramCredentials
    /// (1: SHA-256, 2: SHA-512).
    pub fn scram_type(self) -> Option<i8> {
        match self {
            Mechanism::Plain => None,
            Mechanism::ScramSha256 => Some(1),
            Mechanism::ScramSha512 => Some(2),
        }
    }

    pub fn from_scram_type(t: i8) -> Option<Mechanism> {
        match t {
            1 => Some(Mechanism::ScramSha256),
            2 => Some(Mechanism::ScramSha512),
            _ => None,
        }
    }
}
