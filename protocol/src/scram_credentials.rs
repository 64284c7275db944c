//! DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials
//! (key 51, v0), both flexible (KIP-554): which SCRAM mechanisms a user
//! has, and setting or deleting them. A client salts the password itself;
//! the salted password crosses the wire, never the password.
//!
//! Describe request: users nullable [name string] (null: every user).
//! Response: throttle_time_ms int32, error_code int16, error_message
//! nullable string, results [user string, error_code int16, error_message
//! nullable string, credential_infos [mechanism int8, iterations int32]].
//!
//! Alter request: deletions [name string, mechanism int8], upsertions
//! [name string, mechanism int8, iterations int32, salt bytes,
//! salted_password bytes]. Response: throttle_time_ms int32, results
//! [user string, error_code int16, error_message nullable string].

use bytes::Bytes;

use super::wire::{Reader, WireResult, Writer};

pub const DESCRIBE_KEY: i16 = 50;
pub const ALTER_KEY: i16 = 51;
pub const VERSION_MAX: i16 = 0;
pub const FLEXIBLE_FROM: i16 = 0;
const F: bool = true;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeUserScramCredentialsRequest {
    pub users: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeUserScramCredentialsResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub results: Vec<UserCredentials>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserCredentials {
    pub user: String,
    pub error_code: i16,
    pub error_message: Option<String>,
    /// (mechanism, iterations).
    pub infos: Vec<(i8, i32)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterUserScramCredentialsRequest {
    pub deletions: Vec<(String, i8)>,
    pub upsertions: Vec<Upsertion>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Bytes,
    pub salted_password: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterUserScramCredentialsResponse {
    /// (user, error_code, error_message).
    pub results: Vec<(String, i16, Option<String>)>,
}

impl DescribeUserScramCredentialsRequest {
    pub fn decode(r: &mut Reader) -> WireResult<DescribeUserScramCredentialsRequest> {
        let users = match r.array_len(F, 2, "users")? {
            None => None,
            Some(n) => {
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(r.string(F, "name")?);
                    r.tagged_fields_if(F)?;
                }
                Some(v)
            }
        };
        r.tagged_fields_if(F)?;
        Ok(DescribeUserScramCredentialsRequest { users })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.array_len(F, self.users.as_ref().map(|u| u.len()));
        for u in self.users.iter().flatten() {
            w.string(F, u);
            w.empty_tagged_fields_if(F);
        }
        w.empty_tagged_fields_if(F);
    }
}

impl DescribeUserScramCredentialsResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(0);
        w.i16(self.error_code);
        w.nullable_string(F, self.error_message.as_deref());
        w.structs(F, &self.results, |w, u| {
            w.string(F, &u.user);
            w.i16(u.error_code);
            w.nullable_string(F, u.error_message.as_deref());
            w.structs(F, &u.infos, |w, (m, i)| {
                w.i8(*m);
                w.i32(*i);
            });
        });
        w.empty_tagged_fields_if(F);
    }

    pub fn decode(r: &mut Reader) -> WireResult<DescribeUserScramCredentialsResponse> {
        r.i32("throttle_time_ms")?;
        let error_code = r.i16("error_code")?;
        let error_message = r.nullable_string(F, "error_message")?;
        let results = r.structs(F, 4, "results", |r| {
            Ok(UserCredentials {
                user: r.string(F, "user")?,
                error_code: r.i16("error_code")?,
                error_message: r.nullable_string(F, "error_message")?,
                infos: r.structs(F, 5, "credential_infos", |r| {
                    Ok((r.i8("mechanism")?, r.i32("iterations")?))
                })?,
            })
        })?;
        r.tagged_fields_if(F)?;
        Ok(DescribeUserScramCredentialsResponse {
            error_code,
            error_message,
            results,
        })
    }
}

impl AlterUserScramCredentialsRequest {
    pub fn decode(r: &mut Reader) -> WireResult<AlterUserScramCredentialsRequest> {
        let deletions = r.structs(F, 3, "deletions", |r| Ok((r.string(F, "name")?, r.i8("mechanism")?)))?;
        let upsertions = r.structs(F, 8, "upsertions", |r| {
            Ok(Upsertion {
                name: r.string(F, "name")?,
                mechanism: r.i8("mechanism")?,
                iterations: r.i32("iterations")?,
                salt: r.bytes(F, "salt")?,
                salted_password: r.bytes(F, "salted_password")?,
            })
        })?;
        r.tagged_fields_if(F)?;
        Ok(AlterUserScramCredentialsRequest { deletions, upsertions })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.structs(F, &self.deletions, |w, (name, m)| {
            w.string(F, name);
            w.i8(*m);
        });
        w.structs(F, &self.upsertions, |w, u| {
            w.string(F, &u.name);
            w.i8(u.mechanism);
            w.i32(u.iterations);
            w.nullable_bytes(F, Some(&u.salt));
            w.nullable_bytes(F, Some(&u.salted_password));
        });
        w.empty_tagged_fields_if(F);
    }
}

impl AlterUserScramCredentialsResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(0);
        w.structs(F, &self.results, |w, (user, code, message)| {
            w.string(F, user);
            w.i16(*code);
            w.nullable_string(F, message.as_deref());
        });
        w.empty_tagged_fields_if(F);
    }

    pub fn decode(r: &mut Reader) -> WireResult<AlterUserScramCredentialsResponse> {
        r.i32("throttle_time_ms")?;
        let results = r.structs(F, 4, "results", |r| {
            Ok((
                r.string(F, "user")?,
                r.i16("error_code")?,
                r.nullable_string(F, "error_message")?,
            ))
        })?;
        r.tagged_fields_if(F)?;
        Ok(AlterUserScramCredentialsResponse { results })
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    #[test]
    fn round_trips() {
        for users in [None, Some(vec!["alice".to_string(), "bob".into()])] {
            let req = DescribeUserScramCredentialsRequest { users };
            let bytes = round_trip(&req, |x, w| x.encode(w), DescribeUserScramCredentialsRequest::decode);
            every_prefix_fails(&bytes, DescribeUserScramCredentialsRequest::decode);
        }
        let resp = DescribeUserScramCredentialsResponse {
            error_code: 0,
            error_message: None,
            results: vec![UserCredentials {
                user: "alice".into(),
                error_code: 0,
                error_message: None,
                infos: vec![(1, 4096), (2, 8192)],
            }],
        };
        round_trip(&resp, |x, w| x.encode(w), DescribeUserScramCredentialsResponse::decode);
        let req = AlterUserScramCredentialsRequest {
            deletions: vec![("bob".into(), 1)],
            upsertions: vec![Upsertion {
                name: "alice".into(),
                mechanism: 2,
                iterations: 4096,
                salt: Bytes::from_static(b"NaCl"),
                salted_password: Bytes::from(vec![7u8; 64]),
            }],
        };
        let bytes = round_trip(&req, |x, w| x.encode(w), AlterUserScramCredentialsRequest::decode);
        every_prefix_fails(&bytes, AlterUserScramCredentialsRequest::decode);
        let resp = AlterUserScramCredentialsResponse {
            results: vec![
                ("alice".into(), 0, None),
                ("bob".into(), 91, Some("no such credential".into())),
            ],
        };
        round_trip(&resp, |x, w| x.encode(w), AlterUserScramCredentialsResponse::decode);
    }
}
