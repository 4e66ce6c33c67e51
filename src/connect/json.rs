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
        let message = DynamicMessage::deserialize_with_options(input, &mut de, &options)
            .map_err(ConnectError::undecodable)?;
        de.end().map_err(ConnectError::undecodable)?;
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
