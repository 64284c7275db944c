//! DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
//! v1-3, flexible from v2 (KIP-140, KIP-290 pattern types): Kafka's ACLs,
//! each a resource pattern (type, name, pattern type) and an entry
//! (principal, host, operation, permission). The codes are Kafka's:
//!
//! - resource type: 1 any, 2 topic, 3 group, 4 cluster, 5 transactional id,
//!   6 delegation token, 7 user;
//! - pattern type: 1 any, 2 match, 3 literal, 4 prefixed;
//! - operation: 1 any, 2 all, 3 read, 4 write, 5 create, 6 delete, 7 alter,
//!   8 describe, 9 cluster action, 10 describe configs, 11 alter configs,
//!   12 idempotent write, 13 create tokens, 14 describe tokens;
//! - permission: 1 any, 2 deny, 3 allow.
//!
//! A filter (DescribeAcls, each DeleteAcls filter): resource_type i8,
//! resource_name nullable string, pattern_type i8, principal nullable
//! string, host nullable string, operation i8, permission i8.
//! CreateAcls: creations [resource_type i8, resource_name string,
//! pattern_type i8, principal string, host string, operation i8,
//! permission i8]; answered results [error_code i16, error_message
//! nullable string]. DescribeAcls is answered error_code, error_message,
//! resources [resource_type, resource_name, pattern_type, acls [principal,
//! host, operation, permission]]; DeleteAcls filter_results [error_code,
//! error_message, matching_acls [error_code, error_message, resource_type,
//! resource_name, pattern_type, principal, host, operation, permission]].

use super::wire::{Reader, WireResult, Writer};

pub const DESCRIBE_KEY: i16 = 29;
pub const CREATE_KEY: i16 = 30;
pub const DELETE_KEY: i16 = 31;
pub const VERSION_MIN: i16 = 1;
pub const VERSION_MAX: i16 = 3;
pub const FLEXIBLE_FROM: i16 = 2;

fn flexible(v: i16) -> bool {
    v >= FLEXIBLE_FROM
}

/// One ACL: a resource pattern and an entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Acl {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// Which ACLs: `None` (and the "any" codes) match everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl AclFilter {
    pub fn decode(r: &mut Reader, v: i16) -> WireResult<AclFilter> {
        let f = flexible(v);
        Ok(AclFilter {
            resource_type: r.i8("resource_type")?,
            resource_name: r.nullable_string(f, "resource_name")?,
            pattern_type: r.i8("pattern_type")?,
            principal: r.nullable_string(f, "principal")?,
            host: r.nullable_string(f, "host")?,
            operation: r.i8("operation")?,
            permission: r.i8("permission")?,
        })
    }

    pub fn encode(&self, w: &mut Writer, v: i16) {
        let f = flexible(v);
        w.i8(self.resource_type);
        w.nullable_string(f, self.resource_name.as_deref());
        w.i8(self.pattern_type);
        w.nullable_string(f, self.principal.as_deref());
        w.nullable_string(f, self.host.as_deref());
        w.i8(self.operation);
        w.i8(self.permission);
    }
}

impl Acl {
    fn decode(r: &mut Reader, v: i16) -> WireResult<Acl> {
        let f = flexible(v);
        Ok(Acl {
            resource_type: r.i8("resource_type")?,
            resource_name: r.string(f, "resource_name")?,
            pattern_type: r.i8("pattern_type")?,
            principal: r.string(f, "principal")?,
            host: r.string(f, "host")?,
            operation: r.i8("operation")?,
            permission: r.i8("permission")?,
        })
    }

    fn encode(&self, w: &mut Writer, v: i16) {
        let f = flexible(v);
        w.i8(self.resource_type);
        w.string(f, &self.resource_name);
        w.i8(self.pattern_type);
        w.string(f, &self.principal);
        w.string(f, &self.host);
        w.i8(self.operation);
        w.i8(self.permission);
    }
}

/// DescribeAcls request.
pub fn decode_describe(r: &mut Reader, v: i16) -> WireResult<AclFilter> {
    let filter = AclFilter::decode(r, v)?;
    r.tagged_fields_if(flexible(v))?;
    Ok(filter)
}

pub fn encode_describe(w: &mut Writer, v: i16, filter: &AclFilter) {
    filter.encode(w, v);
    w.empty_tagged_fields_if(flexible(v));
}

/// CreateAcls request: the creations.
pub fn decode_create(r: &mut Reader, v: i16) -> WireResult<Vec<Acl>> {
    let f = flexible(v);
    let creations = r.structs(f, 10, "creations", |r| Acl::decode(r, v))?;
    r.tagged_fields_if(f)?;
    Ok(creations)
}

pub fn encode_create(w: &mut Writer, v: i16, creations: &[Acl]) {
    let f = flexible(v);
    w.structs(f, creations, |w, a| a.encode(w, v));
    w.empty_tagged_fields_if(f);
}

/// DeleteAcls request: the filters.
pub fn decode_delete(r: &mut Reader, v: i16) -> WireResult<Vec<AclFilter>> {
    let f = flexible(v);
    let filters = r.structs(f, 9, "filters", |r| AclFilter::decode(r, v))?;
    r.tagged_fields_if(f)?;
    Ok(filters)
}

pub fn encode_delete(w: &mut Writer, v: i16, filters: &[AclFilter]) {
    let f = flexible(v);
    w.structs(f, filters, |w, a| a.encode(w, v));
    w.empty_tagged_fields_if(f);
}

/// A per-item outcome: error code and message.
pub type Outcome = (i16, Option<String>);

/// DescribeAcls response: the ACLs, grouped by resource pattern here.
pub fn encode_describe_response(w: &mut Writer, v: i16, outcome: &Outcome, acls: &[Acl]) {
    let f = flexible(v);
    w.i32(0);
    w.i16(outcome.0);
    w.nullable_string(f, outcome.1.as_deref());
    let mut groups: Vec<(&Acl, Vec<&Acl>)> = Vec::new();
    for a in acls {
        let same = |g: &&Acl| {
            g.resource_type == a.resource_type && g.resource_name == a.resource_name && g.pattern_type == a.pattern_type
        };
        match groups.iter_mut().find(|(g, _)| same(g)) {
            Some((_, members)) => members.push(a),
            None => groups.push((a, vec![a])),
        }
    }
    w.structs(f, &groups, |w, (g, members)| {
        w.i8(g.resource_type);
        w.string(f, &g.resource_name);
        w.i8(g.pattern_type);
        w.structs(f, members, |w, a| {
            w.string(f, &a.principal);
            w.string(f, &a.host);
            w.i8(a.operation);
            w.i8(a.permission);
        });
    });
    w.empty_tagged_fields_if(f);
}

pub fn decode_describe_response(r: &mut Reader, v: i16) -> WireResult<(Outcome, Vec<Acl>)> {
    let f = flexible(v);
    r.i32("throttle_time_ms")?;
    let outcome = (r.i16("error_code")?, r.nullable_string(f, "error_message")?);
    let groups = r.structs(f, 8, "resources", |r| {
        let (t, name, p) = (
            r.i8("resource_type")?,
            r.string(f, "resource_name")?,
            r.i8("pattern_type")?,
        );
        let entries = r.structs(f, 6, "acls", |r| {
            Ok((
                r.string(f, "principal")?,
                r.string(f, "host")?,
                r.i8("operation")?,
                r.i8("permission")?,
            ))
        })?;
        Ok(entries
            .into_iter()
            .map(|(principal, host, operation, permission)| Acl {
                resource_type: t,
                resource_name: name.clone(),
                pattern_type: p,
                principal,
                host,
                operation,
                permission,
            })
            .collect::<Vec<_>>())
    })?;
    r.tagged_fields_if(f)?;
    Ok((outcome, groups.into_iter().flatten().collect()))
}

pub fn encode_create_response(w: &mut Writer, v: i16, results: &[Outcome]) {
    let f = flexible(v);
    w.i32(0);
    w.structs(f, results, |w, (code, message)| {
        w.i16(*code);
        w.nullable_string(f, message.as_deref());
    });
    w.empty_tagged_fields_if(f);
}

pub fn decode_create_response(r: &mut Reader, v: i16) -> WireResult<Vec<Outcome>> {
    let f = flexible(v);
    r.i32("throttle_time_ms")?;
    let results = r.structs(f, 4, "results", |r| {
        Ok((r.i16("error_code")?, r.nullable_string(f, "error_message")?))
    })?;
    r.tagged_fields_if(f)?;
    Ok(results)
}

/// DeleteAcls response: per filter, its outcome and the ACLs it deleted.
pub fn encode_delete_response(w: &mut Writer, v: i16, results: &[(Outcome, Vec<Acl>)]) {
    let f = flexible(v);
    w.i32(0);
    w.structs(f, results, |w, ((code, message), acls)| {
        w.i16(*code);
        w.nullable_string(f, message.as_deref());
        w.structs(f, acls, |w, a| {
            w.i16(0);
            w.nullable_string(f, None);
            a.encode(w, v);
        });
    });
    w.empty_tagged_fields_if(f);
}

pub fn decode_delete_response(r: &mut Reader, v: i16) -> WireResult<Vec<(Outcome, Vec<Acl>)>> {
    let f = flexible(v);
    r.i32("throttle_time_ms")?;
    let results = r.structs(f, 4, "filter_results", |r| {
        let outcome = (r.i16("error_code")?, r.nullable_string(f, "error_message")?);
        let acls = r.structs(f, 14, "matching_acls", |r| {
            r.i16("error_code")?;
            r.nullable_string(f, "error_message")?;
            Acl::decode(r, v)
        })?;
        Ok((outcome, acls))
    })?;
    r.tagged_fields_if(f)?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::super::codec_testing::{every_prefix_fails, round_trip};
    use super::*;

    fn acl(name: &str, op: i8) -> Acl {
        Acl {
            resource_type: 2,
            resource_name: name.into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: 3,
        }
    }

    #[test]
    fn round_trips_at_every_version() {
        for v in VERSION_MIN..=VERSION_MAX {
            let filter = AclFilter {
                resource_type: 2,
                resource_name: None,
                pattern_type: 2,
                principal: Some("User:alice".into()),
                host: None,
                operation: 1,
                permission: 1,
            };
            let bytes = round_trip(&filter, |x, w| encode_describe(w, v, x), |r| decode_describe(r, v));
            every_prefix_fails(&bytes, |r| decode_describe(r, v));
            let creations = vec![acl("orders", 3), acl("orders", 4)];
            let bytes = round_trip(&creations, |x, w| encode_create(w, v, x), |r| decode_create(r, v));
            every_prefix_fails(&bytes, |r| decode_create(r, v));
            let filters = vec![filter.clone()];
            round_trip(&filters, |x, w| encode_delete(w, v, x), |r| decode_delete(r, v));
            let described = ((0, None), vec![acl("a", 3), acl("b", 3), acl("a", 4)]);
            let mut w = Writer::new();
            encode_describe_response(&mut w, v, &described.0, &described.1);
            let mut r = Reader::new(w.into_bytes().freeze());
            let (outcome, acls) = decode_describe_response(&mut r, v).unwrap();
            assert_eq!(outcome, (0, None));
            let mut sorted = acls.clone();
            sorted.sort();
            let mut expected = described.1.clone();
            expected.sort();
            assert_eq!(sorted, expected, "grouped by resource, every ACL back");
            let results = vec![(0, None), (87, Some("bad".into()))];
            round_trip(
                &results,
                |x, w| encode_create_response(w, v, x),
                |r| decode_create_response(r, v),
            );
            let deleted = vec![((0, None), vec![acl("a", 3)])];
            round_trip(
                &deleted,
                |x, w| encode_delete_response(w, v, x),
                |r| decode_delete_response(r, v),
            );
        }
    }
}
