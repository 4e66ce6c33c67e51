//! Messages between Connect's two encodings and the wire: a method's request decoded from
//! JSON (proto3's JSON mapping: bytes in base64, durations as `"30s"`, enums by name, field
//! names as in the proto or in lowerCamelCase; unknown fields refused) and encoded as
//! protobuf, and its response back to JSON — with `prost-reflect` over the descriptors
//! compiled into claimd, so there is no second copy of the messages.

use super::codes::ConnectError;
use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
    ServiceDescriptor,
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
            .map_err(|e| {
                let field = field_at(&input, &track.path(), &e.to_string());
                ConnectError::undecodable(e, field)
            })?;
        de.end().map_err(|e| ConnectError::undecodable(e, None))?;
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

/// The request field a JSON decoding error is about, by its proto name: the top-level key
/// where decoding stopped (in the proto's spelling or in lowerCamelCase), or the unknown
/// field prost-reflect names in its message; `None` when the JSON itself is malformed.
fn field_at(
    input: &MessageDescriptor,
    path: &serde_path_to_error::Path,
    error: &str,
) -> Option<String> {
    use serde_path_to_error::Segment;
    let first = path.iter().find_map(|segment| match segment {
        Segment::Map { key } => Some(key.as_str()),
        _ => None,
    });
    if let Some(unknown) = error
        .strip_prefix("unrecognized field name '")
        .and_then(|rest| rest.split('\'').next())
    {
        return Some(match first {
            Some(parent) => format!("{}.{unknown}", proto_name(input, parent)),
            None => unknown.to_owned(),
        });
    }
    first.map(|key| proto_name(input, key))
}

/// `key` as the proto names the field it stands for (JSON may use the lowerCamelCase name).
fn proto_name(input: &MessageDescriptor, key: &str) -> String {
    input
        .get_field_by_json_name(key)
        .or_else(|| input.get_field_by_name(key))
        .map_or_else(|| key.to_owned(), |field| field.name().to_owned())
}
