//! Messages between Connect's two encodings and the wire: a method's request decoded from
//! JSON (proto3's JSON mapping: bytes in base64, durations as `"30s"`, enums by name, field
//! names as in the proto or in lowerCamelCase; unknown fields and fields given twice
//! refused, `duplicates.rs`) and encoded as
//! protobuf, and its response back to JSON — with `prost-reflect` over the descriptors
//! compiled into claimd, so there is no second copy of the messages. A request that does
//! not decode is answered naming the field and what that field takes, from the descriptors
//! alone: the decoder's own message is never passed on, since serde and prost-reflect quote
//! the value they could not use (`"…"`, `'…'`, `` `…` ``), and that may be a token or a
//! payload sent in the wrong field (docs/DESIGN.md §5.11).

use super::codes::ConnectError;
use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor,
    SerializeOptions, ServiceDescriptor,
};

/// ClaimService's methods and their messages.
#[derive(Debug)]
pub struct Messages {
    service: ServiceDescriptor,
}

impl Messages {
    /// From the descriptors built into claimd.
    pub fn load() -> anyhow::Result<Messages> {
        let pool = DescriptorPool::decode(crate::pb::FILE_DESCRIPTOR_SET)?;
        let service = pool
            .get_service_by_name("claimd.v1.ClaimService")
            .ok_or_else(|| anyhow::anyhow!("claimd.v1.ClaimService is not in the descriptors"))?;
        Ok(Messages { service })
    }

    /// The input and output messages of the method `path` names.
    fn method(&self, path: &str) -> Result<(MessageDescriptor, MessageDescriptor), ConnectError> {
        let name = path.rsplit('/').next().unwrap_or_default();
        self.service
            .methods()
            .find(|m| m.name() == name)
            .map(|m| (m.input(), m.output()))
            .ok_or_else(|| {
                ConnectError::from_status(&tonic::Status::unimplemented(format!(
                    "ClaimService has no method {name}"
                )))
            })
    }

    /// The protobuf encoding of the JSON request `body` of the method `path` names.
    pub fn request_from_json(&self, path: &str, body: &[u8]) -> Result<Bytes, ConnectError> {
        let (input, _) = self.method(path)?;
        let mut de = serde_json::Deserializer::from_slice(body);
        let options = DeserializeOptions::new().deny_unknown_fields(true);
        let mut track = serde_path_to_error::Track::new();
        let tracked = serde_path_to_error::Deserializer::new(&mut de, &mut track);
        let message = DynamicMessage::deserialize_with_options(input.clone(), tracked, &options)
            .map_err(|e| undecodable(&input, &track.path(), &e))?;
        de.end()
            .map_err(|e| ConnectError::undecodable(&not_json(&e), None))?;
        // serde keeps the last of a field given twice; proto3's parsers refuse it.
        if let Some(field) = super::duplicates::first_duplicate(&input, body) {
            return Err(ConnectError::duplicate_field(field));
        }
        Ok(Bytes::from(message.encode_to_vec()))
    }

    /// The JSON of the protobuf response `message` of the method `path` names.
    pub fn response_to_json(&self, path: &str, message: &[u8]) -> Result<Bytes, ConnectError> {
        let (_, output) = self.method(path)?;
        let decoded = DynamicMessage::decode(output, message)
            .map_err(|_| ConnectError::internal("the answer did not decode"))?;
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::new(&mut out);
        decoded
            .serialize_with_options(&mut ser, &SerializeOptions::new())
            .map_err(|_| ConnectError::internal("the answer did not encode as JSON"))?;
        Ok(Bytes::from(out))
    }
}

/// The error for JSON that did not decode as `input` (see the module): the field decoding
/// stopped at — the top-level key, by its proto name, or the unknown field — and what it
/// takes, or where the JSON broke.
fn undecodable(
    input: &MessageDescriptor,
    path: &serde_path_to_error::Path,
    error: &serde_json::Error,
) -> ConnectError {
    use serde_json::error::Category;
    use serde_path_to_error::Segment;
    let first = path.iter().find_map(|segment| match segment {
        Segment::Map { key } => field_of(input, key),
        _ => None,
    });
    let text = error.to_string();
    if let Some(unknown) = text
        .strip_prefix("unrecognized field name '")
        .and_then(|rest| rest.split('\'').next())
    {
        // A name that could not be a field's is not repeated: it may be anything.
        if !is_identifier(unknown) {
            let why = format!("a field {} does not have", input.name());
            return ConnectError::undecodable(&why, None);
        }
        let field = match &first {
            Some(parent) => format!("{}.{unknown}", parent.name()),
            None => unknown.to_owned(),
        };
        return ConnectError::undecodable("no such field", Some(field));
    }
    let why = match (error.classify(), &first) {
        (Category::Syntax | Category::Eof, _) => not_json(error),
        (_, Some(field)) => format!("expected {}", expected(field)),
        (_, None) => format!("expected a JSON object ({})", input.name()),
    };
    ConnectError::undecodable(&why, first.map(|f| f.name().to_owned()))
}

/// Where JSON that is not JSON broke, by position only.
fn not_json(error: &serde_json::Error) -> String {
    let what = match error.classify() {
        serde_json::error::Category::Eof => "the JSON ends early",
        _ => "malformed JSON",
    };
    format!("{what} at line {}, column {}", error.line(), error.column())
}

/// The field `key` stands for (its proto name or its lowerCamelCase JSON name).
fn field_of(input: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    input
        .get_field_by_json_name(key)
        .or_else(|| input.get_field_by_name(key))
}

/// Whether `name` could be a proto field's name (letters, digits, `_`; at most 64).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What `field` takes in proto3's JSON mapping, in words.
fn expected(field: &FieldDescriptor) -> String {
    let one = match field.kind() {
        Kind::Double | Kind::Float => "a number".to_owned(),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Uint32 | Kind::Fixed32 => {
            "an integer".to_owned()
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64 => {
            "an integer (a number or a string of digits)".to_owned()
        }
        Kind::Bool => "true or false".to_owned(),
        Kind::String => "a string".to_owned(),
        Kind::Bytes => "bytes as a base64 string".to_owned(),
        Kind::Message(m) => match m.full_name() {
            "google.protobuf.Duration" => "a duration string such as \"30s\"".to_owned(),
            "google.protobuf.Timestamp" => "an RFC 3339 timestamp string".to_owned(),
            _ => format!("a JSON object ({})", m.name()),
        },
        Kind::Enum(e) => {
            let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
            format!("a {} name ({}) or number", e.name(), names.join(", "))
        }
    };
    if field.is_map() {
        "a JSON object".to_owned()
    } else if field.is_list() {
        format!("a list, each {one}")
    } else {
        one
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(method: &str, body: &str) -> String {
        let messages = Messages::load().expect("the descriptors");
        let path = format!("/claimd.v1.ClaimService/{method}");
        let e = messages
            .request_from_json(&path, body.as_bytes())
            .expect_err("refused");
        let mut json: serde_json::Value =
            serde_json::from_slice(&http_body_of(e.into_response())).expect("JSON");
        json["message"]
            .take()
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn http_body_of(response: http::Response<tonic::body::Body>) -> Vec<u8> {
        use http_body_util::BodyExt;
        let body = response.into_body();
        let collected = futures_util::FutureExt::now_or_never(body.collect());
        // A Full body is ready at once.
        collected
            .expect("ready")
            .expect("a body")
            .to_bytes()
            .to_vec()
    }

    #[test]
    fn decoding_errors_name_the_field_and_never_the_value() {
        let cases = [
            ("List", r#"{"states":["tok-SECRET-123"]}"#, "states: "),
            ("List", r#"{"states":"tok-SECRET-1"}"#, "states: "),
            ("List", r#"{"pageSize":"tok-SECRET-2"}"#, "page_size: "),
            ("List", r#"{"pageSize":98765432109876}"#, "page_size: "),
            ("Claim", r#"{"leaseTtl":"tok-SECRET-3"}"#, "lease_ttl: "),
            ("Claim", r#"{"lease_ttl":7654321}"#, "lease_ttl: "),
            (
                "Claim",
                r#"{"fingerprint":"tok-SECRET-4!"}"#,
                "fingerprint: ",
            ),
            ("Claim", r#"{"namespace":["tok-SECRET-5"]}"#, "namespace: "),
            (
                "Claim",
                r#"{"deliveryAttempt":"tok-SECRET-6"}"#,
                "delivery_attempt: ",
            ),
            ("Claim", r#"{"tok-SECRET-7":1}"#, "the request body"),
            (
                "Claim",
                r#"{"namespace":"a"} tok-SECRET-8"#,
                "the request body",
            ),
            ("Claim", r#"["tok-SECRET-9"]"#, "the request body"),
        ];
        for (method, body, start) in cases {
            let message = error_of(method, body);
            assert!(message.starts_with(start), "{body}: {message}");
            for leaked in ["SECRET", "7654321", "98765432109876"] {
                assert!(!message.contains(leaked), "{body}: {message}");
            }
        }
        let message = error_of("List", r#"{"states":["tok-SECRET-123"]}"#);
        assert!(message.contains("a list, each a State name"), "{message}");
    }
}
