//! Near-valid requests for the fuzz properties: a valid message of each request kind, and
//! one of its fields replaced (through `prost-reflect`, by the field's type) with a value
//! from [`Mutation`]: empty, too long, outside the alphabet, NUL, malformed tokens,
//! out-of-range or malformed durations, unknown states, arbitrary text and bytes.

use claimd::pb;
use proptest::prelude::*;
use proptest::sample::Index;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, Value};

/// The descriptors of `claimd.v1`.
pub fn pool() -> DescriptorPool {
    // claimd's own descriptor set always decodes.
    DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("claimd's descriptors")
}

/// The proto field names of request message `kind`.
pub fn field_names(pool: &DescriptorPool, kind: &str) -> Vec<String> {
    let desc = message(pool, kind);
    desc.fields().map(|f| f.name().to_owned()).collect()
}

fn message(pool: &DescriptorPool, kind: &str) -> prost_reflect::MessageDescriptor {
    let name = format!("claimd.v1.{kind}");
    pool.get_message_by_name(&name)
        .unwrap_or_else(|| panic!("no message {name}"))
}

/// A protobuf varint.
pub fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out
}

/// The encoding of a valid request of `kind` (a token that is well formed, not current).
pub fn valid(kind: &str) -> Vec<u8> {
    let (namespace, key) = ("fuzz".to_owned(), "k".to_owned());
    let token = uuid::Uuid::new_v4().to_string();
    let duration = |seconds| Some(prost_types::Duration { seconds, nanos: 0 });
    match kind {
        "ClaimRequest" => pb::ClaimRequest {
            namespace,
            key,
            fingerprint: b"fp".to_vec(),
            lease_ttl: duration(30),
            recovery_payload: b"p".to_vec(),
            delivery_attempt: 1,
            wait: duration(0),
        }
        .encode_to_vec(),
        "CompleteRequest" => pb::CompleteRequest {
            namespace,
            key,
            claim_token: token,
            response: b"r".to_vec(),
        }
        .encode_to_vec(),
        "HeartbeatRequest" => pb::HeartbeatRequest {
            namespace,
            key,
            claim_token: token,
            lease_ttl: duration(30),
            checkpoint: Some(b"c".to_vec()),
        }
        .encode_to_vec(),
        "RetryRequest" => pb::RetryRequest {
            namespace,
            key,
            claim_token: token,
            error: "e".into(),
            retry_after: duration(5),
            count_attempt: Some(true),
        }
        .encode_to_vec(),
        "QuarantineRequest" => pb::QuarantineRequest {
            namespace,
            key,
            claim_token: token,
            error: "e".into(),
        }
        .encode_to_vec(),
        "GetRequest" => pb::GetRequest { namespace, key }.encode_to_vec(),
        "ListOrphanedRequest" => pb::ListOrphanedRequest {
            namespace,
            page_size: 10,
            page_token: String::new(),
            overdue_by: duration(0),
        }
        .encode_to_vec(),
        "ListRequest" => pb::ListRequest {
            namespace,
            states: vec![pb::State::Quarantined as i32],
            page_size: 10,
            page_token: String::new(),
        }
        .encode_to_vec(),
        "RedriveRequest" => pb::RedriveRequest { namespace, key }.encode_to_vec(),
        other => panic!("no request message {other}"),
    }
}

/// One candidate value per field type; [`apply`] takes the one its field's type needs.
#[derive(Debug, Clone)]
pub struct Mutation {
    text: String,
    bytes: Vec<u8>,
    int: i64,
    seconds: i64,
    nanos: i32,
    states: Vec<i32>,
    flag: bool,
}

/// Values at and beyond every limit of docs/DESIGN.md §2.8, and arbitrary ones.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let uuid = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    let text = prop_oneof![
        Just(String::new()),
        Just("a".repeat(129)),
        Just("a".repeat(513)),
        Just("a".repeat(64 * 1024 + 1)),
        Just("has space".to_owned()),
        Just("ümlaut".to_owned()),
        Just("a\0b".to_owned()),
        Just("not-a-uuid".to_owned()),
        Just(format!("{{{uuid}}}")),
        Just(uuid.to_uppercase()),
        Just(uuid.replace('-', "")),
        Just(format!("{uuid}\0")),
        "[A-Za-z0-9._:/-]{1,20}",
        any::<String>(),
    ];
    let bytes = prop_oneof![
        Just(Vec::new()),
        Just(vec![0xff; 65]),
        Just(vec![0; 64 * 1024]),
        Just(vec![0; 64 * 1024 + 1]),
        proptest::collection::vec(any::<u8>(), 0..100),
    ];
    let int = prop_oneof![
        Just(0i64),
        Just(-1),
        Just(1001),
        Just(i64::from(i32::MIN)),
        Just(i64::from(i32::MAX)),
        Just(i64::from(u32::MAX)),
        any::<i64>(),
    ];
    let seconds = prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(86_400),
        Just(86_401),
        Just(i64::MAX),
        Just(i64::MIN),
        any::<i64>(),
    ];
    let nanos = prop_oneof![
        Just(0i32),
        Just(1),
        Just(-1),
        Just(999_999_999),
        Just(1_000_000_000),
        Just(i32::MIN),
        any::<i32>(),
    ];
    let states = proptest::collection::vec(prop_oneof![0..6i32, any::<i32>()], 0..4);
    (text, bytes, int, seconds, nanos, states, any::<bool>()).prop_map(
        |(text, bytes, int, seconds, nanos, states, flag)| Mutation {
            text,
            bytes,
            int,
            seconds,
            nanos,
            states,
            flag,
        },
    )
}

/// The valid request of `kind` with the field `pick` chooses set from `mutation`: the
/// field's name and the encoding.
pub fn apply(
    pool: &DescriptorPool,
    kind: &str,
    pick: Index,
    mutation: &Mutation,
) -> (String, Vec<u8>) {
    let desc = message(pool, kind);
    let fields: Vec<_> = desc.fields().collect();
    let field = pick.get(&fields);
    // The valid request was encoded from the same descriptors.
    let mut request = DynamicMessage::decode(desc.clone(), valid(kind).as_slice()).expect("valid");
    let value = if field.is_list() {
        let states = mutation.states.iter().map(|&n| Value::EnumNumber(n));
        Value::List(states.collect())
    } else {
        match field.kind() {
            Kind::String => Value::String(mutation.text.clone()),
            Kind::Bytes => Value::Bytes(mutation.bytes.clone().into()),
            Kind::Int32 => Value::I32(mutation.int as i32),
            Kind::Uint32 => Value::U32(mutation.int as u32),
            Kind::Bool => Value::Bool(mutation.flag),
            Kind::Enum(_) => Value::EnumNumber(mutation.int as i32),
            Kind::Message(duration) => {
                let mut d = DynamicMessage::new(duration);
                d.set_field_by_name("seconds", Value::I64(mutation.seconds));
                d.set_field_by_name("nanos", Value::I32(mutation.nanos));
                Value::Message(d)
            }
            other => panic!("{kind}.{}: no mutation for {other:?}", field.name()),
        }
    };
    request.set_field(field, value);
    (field.name().to_owned(), request.encode_to_vec())
}
