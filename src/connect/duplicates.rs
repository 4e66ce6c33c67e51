//! Duplicate fields in a Connect JSON request (docs/DESIGN.md §5.11): proto3's JSON
//! parsers refuse an object that names one field twice — by the same key, or by its proto
//! name and its lowerCamelCase JSON name (`lease_ttl` and `leaseTtl`) — and so does claimd,
//! since serde keeps the last and a proxy or a log that reads the first would see another
//! key than the one claimd acts on. [`first_duplicate`] walks the JSON once more, after it
//! decoded, and names the first field given twice at any depth of the message (the map
//! keys of a map field are the caller's: the map field is named, never the key).

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The first field of `input` (by its proto name, as `parent.field` when nested) that the
/// JSON `body` gives more than once; `None` when none is, or `body` is not JSON.
pub fn first_duplicate(input: &MessageDescriptor, body: &[u8]) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let walk = Walk {
        shape: Shape::Message(input.clone()),
    };
    // Not JSON: the decoder refused it already.
    walk.deserialize(&mut de).ok().flatten()
}

/// What a JSON value stands for, as far as duplicates go.
#[derive(Clone)]
enum Shape {
    /// A message: its keys name fields, by either name.
    Message(MessageDescriptor),
    /// A map field's object: its keys are the caller's; its values of this shape.
    Map(Box<Shape>),
    /// Anything else: nothing inside is a field.
    Other,
}

/// Walks one JSON value of [`Shape`]: the duplicate found in it, if any, as the path of
/// field names below it (empty: a map key given twice in this very object).
struct Walk {
    shape: Shape,
}

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Option<String>, D::Error> {
        de.deserialize_any(self)
    }
}

/// The shape of a message's value: a nested message (not a well-known type, whose JSON is
/// a string or a number) or anything else.
fn shape_of_message(kind: Kind) -> Shape {
    match kind {
        Kind::Message(m) if !m.full_name().starts_with("google.protobuf.") => Shape::Message(m),
        _ => Shape::Other,
    }
}

/// The shape of `field`'s value (each element's, for a list).
fn shape_of(field: &FieldDescriptor) -> Shape {
    match field.kind() {
        Kind::Message(entry) if field.is_map() => {
            let value = entry.map_entry_value_field().kind();
            Shape::Map(Box::new(shape_of_message(value)))
        }
        kind => shape_of_message(kind),
    }
}

/// `name`, then the path below it.
fn joined(name: &str, below: String) -> String {
    if below.is_empty() {
        name.to_owned()
    } else {
        format!("{name}.{below}")
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let mut seen = HashSet::new();
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let (twice, inner, name) = match &self.shape {
                Shape::Message(m) => {
                    let field = m
                        .get_field_by_json_name(&key)
                        .or_else(|| m.get_field_by_name(&key));
                    match field {
                        // Both names of a field count as one.
                        Some(f) => (
                            !seen.insert(f.name().to_owned()),
                            shape_of(&f),
                            f.name().to_owned(),
                        ),
                        // An unknown field is refused by the decoder already.
                        None => (false, Shape::Other, String::new()),
                    }
                }
                Shape::Map(value) => (!seen.insert(key), (**value).clone(), String::new()),
                Shape::Other => (false, Shape::Other, String::new()),
            };
            let below = map.next_value_seed(Walk { shape: inner })?;
            if found.is_none() {
                found = if twice {
                    Some(name)
                } else {
                    below.map(|b| joined(&name, b))
                };
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<String>, A::Error> {
        let mut found = None;
        let each = || Walk {
            shape: self.shape.clone(),
        };
        while let Some(below) = seq.next_element_seed(each())? {
            found = found.or(below);
        }
        Ok(found)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(method: &str, body: &str) -> Option<String> {
        let pool = prost_reflect::DescriptorPool::decode(crate::pb::FILE_DESCRIPTOR_SET)
            .expect("the descriptors");
        let service = pool
            .get_service_by_name("claimd.v1.ClaimService")
            .expect("the service");
        let method = service.methods().find(|m| m.name() == method);
        first_duplicate(&method.expect("the method").input(), body.as_bytes())
    }

    #[test]
    fn a_field_given_twice_by_either_name_is_found_and_named_by_its_proto_name() {
        let twice = r#"{"namespace":"n","key":"k4","key":"k5"}"#;
        assert_eq!(duplicate("Claim", twice).as_deref(), Some("key"));
        let both = r#"{"namespace":"n","key":"k","leaseTtl":"5s","lease_ttl":"6s"}"#;
        assert_eq!(duplicate("Claim", both).as_deref(), Some("lease_ttl"));
        let once = r#"{"namespace":"n","key":"k","leaseTtl":"5s","fingerprint":"Zg=="}"#;
        assert_eq!(duplicate("Claim", once), None);
        let lists = r#"{"states":["STATE_COMPLETED","STATE_COMPLETED"],"pageSize":2}"#;
        assert_eq!(duplicate("List", lists), None);
        let paged = r#"{"pageSize":2,"page_size":3}"#;
        assert_eq!(duplicate("List", paged).as_deref(), Some("page_size"));
    }
}
