//! `ferrite users …`: the SCRAM users a broker's SASL listeners
//! authenticate (AlterUserScramCredentials and DescribeUserScramCredentials,
//! KIP-554), like `kafka-configs.sh --entity-type users` with
//! `SCRAM-SHA-256=[iterations=…,password=…]`. The password is salted and
//! hashed here; it never crosses the wire (the salted password does: talk
//! to a broker over a listener you trust, or SSL once the CLI speaks it).

use std::path::PathBuf;

use clap::Subcommand;

use ferrite_client::{ClientError, Connection};
use ferrite_protocol::errors;
use ferrite_protocol::scram_credentials::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, Upsertion, ALTER_KEY, DESCRIBE_KEY,
};
use ferrite_security::credential::ScramCredential;
use ferrite_security::Mechanism;

/// Random bytes in a new salt.
const SALT_BYTES: usize = 32;

#[derive(Subcommand, Debug)]
pub enum UsersCommand {
    /// Add a user, or set a user's password (for both SCRAM mechanisms unless one is named).
    Add {
        #[arg(long)]
        user: String,
        /// The password (visible to other local users in the process list: --password-file is not).
        #[arg(long, conflicts_with = "password_file", required_unless_present = "password_file")]
        password: Option<String>,
        /// A file whose first line is the password.
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (default: both).
        #[arg(long)]
        mechanism: Option<String>,
        /// PBKDF2 iterations, 4096 to 16384.
        #[arg(long, default_value_t = 8192)]
        iterations: u32,
    },
    /// List users and their SCRAM mechanisms (all, or one).
    List {
        #[arg(long)]
        user: Option<String>,
    },
    /// Remove a user's credentials (both mechanisms unless one is named).
    Remove {
        #[arg(long)]
        user: String,
        #[arg(long)]
        mechanism: Option<String>,
    },
}

fn kafka(message: String) -> ClientError {
    ClientError::Kafka(message)
}

fn mechanisms(named: Option<&str>) -> Result<Vec<Mechanism>, ClientError> {
    match named {
        None => Ok(vec![Mechanism::ScramSha256, Mechanism::ScramSha512]),
        Some(n) => match Mechanism::parse(&n.to_ascii_uppercase()) {
            Some(m) if m != Mechanism::Plain => Ok(vec![m]),
            _ => Err(kafka(format!("{n}: expected SCRAM-SHA-256 or SCRAM-SHA-512"))),
        },
    }
}

fn password(given: Option<String>, file: Option<PathBuf>) -> Result<String, ClientError> {
    match (given, file) {
        (Some(p), _) => Ok(p),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| kafka(format!("{}: {e}", path.display())))?;
            Ok(text.lines().next().unwrap_or("").to_string())
        }
        (None, None) => Err(kafka("give --password or --password-file".into())),
    }
}

fn salt() -> Result<Vec<u8>, ClientError> {
    let mut salt = vec![0u8; SALT_BYTES];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt)
        .map_err(|_| kafka("the system's random source failed".into()))?;
    Ok(salt)
}

fn alter(bootstrap: &str, req: &AlterUserScramCredentialsRequest) -> Result<(), ClientError> {
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    let mut r = c.call_flexible(ALTER_KEY, 0, |w| req.encode(w))?;
    let resp = AlterUserScramCredentialsResponse::decode(&mut r)?;
    for (user, code, message) in resp.results {
        crate::check(&user, code, message)?;
    }
    Ok(())
}

/// Runs one users command, writing its report to `out`.
pub fn run(bootstrap: &str, cmd: UsersCommand, out: &mut dyn std::io::Write) -> Result<(), ClientError> {
    let w = |e: std::io::Error| kafka(e.to_string());
    match cmd {
        UsersCommand::Add {
            user,
            password: given,
            password_file,
            mechanism,
            iterations,
        } => {
            let password = password(given, password_file)?;
            add(bootstrap, &user, &password, mechanism.as_deref(), iterations)?;
            writeln!(out, "Set the SCRAM credentials of {user}.").map_err(w)
        }
        UsersCommand::Remove { user, mechanism } => {
            // Without --mechanism, the ones the user has (deleting one it
            // lacks would refuse the whole change).
            let held = match mechanism {
                Some(_) => mechanisms(mechanism.as_deref())?,
                None => held_by(bootstrap, &user)?,
            };
            let deletions = held
                .into_iter()
                .map(|m| (user.clone(), m.scram_type().unwrap_or(0)))
                .collect();
            alter(
                bootstrap,
                &AlterUserScramCredentialsRequest {
                    deletions,
                    upsertions: Vec::new(),
                },
            )?;
            writeln!(out, "Removed the SCRAM credentials of {user}.").map_err(w)
        }
        UsersCommand::List { user } => list(bootstrap, user, out),
    }
}

/// Salts `password` for each mechanism and sets it.
fn add(
    bootstrap: &str,
    user: &str,
    password: &str,
    mechanism: Option<&str>,
    iterations: u32,
) -> Result<(), ClientError> {
    if password.is_empty() {
        return Err(kafka("the password is empty".into()));
    }
    let mut upsertions = Vec::new();
    for m in mechanisms(mechanism)? {
        let salt = salt()?;
        let salted = ScramCredential::salted_password(m, password.as_bytes(), &salt, iterations)
            .map_err(|e| kafka(e.to_string()))?;
        upsertions.push(Upsertion {
            name: user.to_string(),
            mechanism: m.scram_type().unwrap_or(0),
            iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
            salt: salt.into(),
            salted_password: salted.into(),
        });
    }
    alter(
        bootstrap,
        &AlterUserScramCredentialsRequest {
            deletions: Vec::new(),
            upsertions,
        },
    )
}

/// The SCRAM mechanisms `user` has.
fn held_by(bootstrap: &str, user: &str) -> Result<Vec<Mechanism>, ClientError> {
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    let req = DescribeUserScramCredentialsRequest {
        users: Some(vec![user.to_string()]),
    };
    let mut r = c.call_flexible(DESCRIBE_KEY, 0, |w| req.encode(w))?;
    let resp = DescribeUserScramCredentialsResponse::decode(&mut r)?;
    let found = resp.results.into_iter().find(|u| u.user == user && u.error_code == 0);
    let held: Vec<Mechanism> = found
        .map(|u| {
            u.infos
                .iter()
                .filter_map(|(m, _)| Mechanism::from_scram_type(*m))
                .collect()
        })
        .unwrap_or_default();
    if held.is_empty() {
        return Err(kafka(format!("{user} has no SCRAM credential")));
    }
    Ok(held)
}

fn list(bootstrap: &str, user: Option<String>, out: &mut dyn std::io::Write) -> Result<(), ClientError> {
    let w = |e: std::io::Error| kafka(e.to_string());
    let mut c = Connection::connect(bootstrap, "ferrite-cli")?;
    let req = DescribeUserScramCredentialsRequest {
        users: user.map(|u| vec![u]),
    };
    let mut r = c.call_flexible(DESCRIBE_KEY, 0, |w| req.encode(w))?;
    let resp = DescribeUserScramCredentialsResponse::decode(&mut r)?;
    let failed = |what: &str, code: i16, message: Option<String>| {
        kafka(format!(
            "{what}{} ({code}){}",
            errors::name(code),
            message.map(|m| format!(": {m}")).unwrap_or_default()
        ))
    };
    if resp.error_code != 0 {
        return Err(failed("", resp.error_code, resp.error_message));
    }
    for u in resp.results {
        if u.error_code != 0 {
            return Err(failed(&format!("{}: ", u.user), u.error_code, u.error_message));
        }
        let infos: Vec<String> = u
            .infos
            .iter()
            .map(|(m, i)| {
                let name = Mechanism::from_scram_type(*m).map(|m| m.name()).unwrap_or("unknown");
                format!("{name} (iterations {i})")
            })
            .collect();
        writeln!(out, "{}: {}", u.user, infos.join(", ")).map_err(w)?;
    }
    Ok(())
}
