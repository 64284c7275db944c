//! DescribeConfigs (key 32, v1-4), AlterConfigs (key 33, v0-2) and
//! IncrementalAlterConfigs (key 44, v0-1).

use super::wire::{Reader, WireResult, Writer};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Where a config value comes from (DescribeConfigs `ConfigSource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
    DynamicBrokerLogger = 6,
}

/// One of the values that stand behind a config, most specific first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeConfigsResource {
    pub resource_type: i8,
    pub name: String,
    /// `None`: every key.
    pub keys: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeConfigsRequest {
    pub resources: Vec<DescribeConfigsResource>,
    pub include_synonyms: bool,
    pub include_documentation: bool,
}

impl DescribeConfigsRequest {
    pub fn decode(r: &mut Reader, version: i16, flexible: bool) -> WireResult<DescribeConfigsRequest> {
        let resources = r.structs(flexible, 4, "config resources", |r| {
            Ok(DescribeConfigsResource {
                resource_type: r.i8("resource_type")?,
                name: r.string(flexible, "resource_name")?,
                keys: match r.array_len(flexible, 1, "configuration_keys")? {
                    None => None,
                    Some(k) => Some(
                        (0..k)
                            .map(|_| r.string(flexible, "key"))
                            .collect::<WireResult<Vec<_>>>()?,
                    ),
                },
            })
        })?;
        let include_synonyms = r.bool("include_synonyms")?;
        let include_documentation = version >= 3 && r.bool("include_documentation")?;
        r.tagged_fields_if(flexible)?;
        Ok(DescribeConfigsRequest {
            resources,
            include_synonyms,
            include_documentation,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub source: ConfigSource,
    pub is_sensitive: bool,
    /// Asked for with `include_synonyms`; empty otherwise.
    pub synonyms: Vec<ConfigSynonym>,
    /// DescribeConfigs `ConfigType` (1 boolean, 2 string, 3 int, 5 long,
    /// 6 double, 7 list).
    pub config_type: i8,
    /// Asked for with `include_documentation` (v3+).
    pub documentation: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeConfigsResult {
    pub error: i16,
    pub error_message: Option<String>,
    pub resource_type: i8,
    pub name: String,
    pub configs: Vec<ConfigEntry>,
}

pub fn encode_describe(w: &mut Writer, version: i16, flexible: bool, results: &[DescribeConfigsResult]) {
    w.i32(0);
    w.structs(flexible, results, |w, res| {
        w.i16(res.error);
        w.nullable_string(flexible, res.error_message.as_deref());
        w.i8(res.resource_type);
        w.string(flexible, &res.name);
        w.structs(flexible, &res.configs, |w, c| {
            w.string(flexible, &c.name);
            w.nullable_string(flexible, c.value.as_deref());
            w.bool(c.read_only);
            w.i8(c.source as i8);
            w.bool(c.is_sensitive);
            w.structs(flexible, &c.synonyms, |w, s| {
                w.string(flexible, &s.name);
                w.nullable_string(flexible, s.value.as_deref());
                w.i8(s.source as i8);
            });
            if version >= 3 {
                w.i8(c.config_type);
                w.nullable_string(flexible, c.documentation.as_deref());
            }
        });
    });
    w.empty_tagged_fields_if(flexible);
}

/// IncrementalAlterConfigs operations.
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterableConfig {
    pub name: String,
    pub op: i8,
    pub value: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterConfigsResource {
    pub resource_type: i8,
    pub name: String,
    pub configs: Vec<AlterableConfig>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncrementalAlterConfigsRequest {
    pub resources: Vec<AlterConfigsResource>,
    pub validate_only: bool,
}

impl IncrementalAlterConfigsRequest {
    pub fn decode(r: &mut Reader, _version: i16, flexible: bool) -> WireResult<IncrementalAlterConfigsRequest> {
        let resources = r.structs(flexible, 4, "alter resources", |r| {
            Ok(AlterConfigsResource {
                resource_type: r.i8("resource_type")?,
                name: r.string(flexible, "resource_name")?,
                configs: r.structs(flexible, 4, "alter configs", |r| {
                    Ok(AlterableConfig {
                        name: r.string(flexible, "config name")?,
                        op: r.i8("config_operation")?,
                        value: r.nullable_string(flexible, "config value")?,
                    })
                })?,
            })
        })?;
        let validate_only = r.bool("validate_only")?;
        r.tagged_fields_if(flexible)?;
        Ok(IncrementalAlterConfigsRequest {
            resources,
            validate_only,
        })
    }
}

/// One resource of an AlterConfigs request: (type, name, [(config name,
/// value)]).
pub type AlterConfigsEntry = (i8, String, Vec<(String, Option<String>)>);

/// AlterConfigs (key 33): each resource's whole set of overrides, replacing
/// the one it had (the names not sent lose their override).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterConfigsRequest {
    pub resources: Vec<AlterConfigsEntry>,
    pub validate_only: bool,
}

impl AlterConfigsRequest {
    pub fn decode(r: &mut Reader, _version: i16, flexible: bool) -> WireResult<AlterConfigsRequest> {
        let resources = r.structs(flexible, 4, "alter resources", |r| {
            let resource_type = r.i8("resource_type")?;
            let name = r.string(flexible, "resource_name")?;
            let configs = r.structs(flexible, 3, "alter configs", |r| {
                Ok((
                    r.string(flexible, "config name")?,
                    r.nullable_string(flexible, "config value")?,
                ))
            })?;
            Ok((resource_type, name, configs))
        })?;
        let validate_only = r.bool("validate_only")?;
        r.tagged_fields_if(flexible)?;
        Ok(AlterConfigsRequest {
            resources,
            validate_only,
        })
    }
}

/// Results of AlterConfigs and IncrementalAlterConfigs (the same
/// response): (error, message, resource type, resource name).
pub fn encode_alter(w: &mut Writer, flexible: bool, results: &[(i16, Option<String>, i8, String)]) {
    w.i32(0);
    w.structs(flexible, results, |w, (error, message, rtype, name)| {
        w.i16(*error);
        w.nullable_string(flexible, message.as_deref());
        w.i8(*rtype);
        w.string(flexible, name);
    });
    w.empty_tagged_fields_if(flexible);
}
