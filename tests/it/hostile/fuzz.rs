//! Property tests over decoding and validation, in process: bytes are decoded with prost as
//! each request message of `claimd.v1` (as tonic does before a handler runs) and handed to
//! claimd's own service (`ClaimsApi` over a real embedded store), which validates them.
//! Whatever the bytes: no panic, no INTERNAL, and every INVALID_ARGUMENT carries exactly one
//! `google.rpc.BadRequest` violation naming a field of that message. Near-valid requests
//! (a valid one with one field mutated: empty, too long, bad characters, NUL, negative or
//! huge durations, malformed tokens, arbitrary bytes) are either served or INVALID_ARGUMENT
//! naming exactly the mutated field. Seeds are fixed, so a run is repeatable. Bytes prost
//! refuses are answered at the port (`bodies.rs`).

mod mutate;

use crate::common::app::store_options;
use claimd::api::{ClaimsApi, DEFAULT_MAX_BLOB};
use claimd::auth::Principal;
use claimd::domain::{Policies, PolicyHandle};
use claimd::pb::{self, claim_service_server::ClaimService};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use prost::Message;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

/// Every request message of `claimd.v1.ClaimService`.
const KINDS: [&str; 9] = [
    "ClaimRequest",
    "CompleteRequest",
    "HeartbeatRequest",
    "RetryRequest",
    "QuarantineRequest",
    "GetRequest",
    "ListOrphanedRequest",
    "ListRequest",
    "RedriveRequest",
];

/// claimd's service over a fresh embedded store, and a runtime to call it on.
struct Harness {
    rt: tokio::runtime::Runtime,
    api: ClaimsApi,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        // A property test cannot run without a runtime and a directory for its store.
        let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}/claimd.db", dir.path().display());
        // A fresh SQLite file in our own directory always opens and migrates.
        let store = rt.block_on(async {
            let store = claimd::store::open(&url, &store_options()).await?;
            store.migrate().await.map(|()| store)
        });
        let store = store.expect("store opens and migrates");
        let policies = PolicyHandle::new(Policies::default());
        // No Claim waits here (a mutated `wait` of up to 60 s on a key in flight would hold
        // the run): `wait` is still validated, and a valid one answered at once.
        let api = ClaimsApi::new(store, policies, DEFAULT_MAX_BLOB)
            .with_waits(0, claimd::drain::Drain::default());
        Harness { rt, api, _dir: dir }
    }

    /// Decodes `bytes` as the request message `kind` and calls its RPC as the default
    /// tenant; `None` if prost refuses the bytes.
    fn call(&self, kind: &str, bytes: &[u8]) -> Option<Result<(), Status>> {
        fn request<T>(message: T) -> Request<T> {
            let mut request = Request::new(message);
            request.extensions_mut().insert(Principal::default_tenant());
            request
        }
        macro_rules! rpc {
            ($ty:ty, $method:ident) => {{
                let message = <$ty>::decode(bytes).ok()?;
                let api = &self.api;
                self.rt
                    .block_on(async { api.$method(request(message)).await.map(drop) })
            }};
        }
        Some(match kind {
            "ClaimRequest" => rpc!(pb::ClaimRequest, claim),
            "CompleteRequest" => rpc!(pb::CompleteRequest, complete),
            "HeartbeatRequest" => rpc!(pb::HeartbeatRequest, heartbeat),
            "RetryRequest" => rpc!(pb::RetryRequest, retry),
            "QuarantineRequest" => rpc!(pb::QuarantineRequest, quarantine),
            "GetRequest" => rpc!(pb::GetRequest, get),
            "ListOrphanedRequest" => rpc!(pb::ListOrphanedRequest, list_orphaned),
            "ListRequest" => rpc!(pb::ListRequest, list),
            "RedriveRequest" => rpc!(pb::RedriveRequest, redrive),
            other => panic!("no request message {other}"),
        })
    }
}

/// A runner with `cases` cases and a fixed seed, persisting nothing.
fn runner(cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// The answer is fine if it is not INTERNAL or UNKNOWN and, if INVALID_ARGUMENT, names
/// exactly one field, one of `fields`, in its message and its BadRequest details.
fn check(kind: &str, answer: Result<(), Status>, fields: &[String]) -> Result<(), TestCaseError> {
    let Err(status) = answer else { return Ok(()) };
    let code = status.code();
    prop_assert!(
        !matches!(code, Code::Internal | Code::Unknown),
        "{kind}: {status:?}"
    );
    if code != Code::InvalidArgument {
        return Ok(());
    }
    let details = status.get_details_bad_request();
    let violations = details.map(|d| d.field_violations).unwrap_or_default();
    prop_assert_eq!(violations.len(), 1, "{}: {:?}", kind, status);
    let field = &violations[0].field;
    prop_assert!(
        fields.contains(field),
        "{kind}: {field} is not one of {fields:?}"
    );
    prop_assert!(status.message().contains(field.as_str()), "{status:?}");
    Ok(())
}

/// Bytes that are often a decodable message: fields 1–8 with arbitrary wire types and
/// payloads (names from the namespace alphabet, arbitrary text, arbitrary bytes), or
/// nothing like protobuf at all.
fn message_bytes() -> impl Strategy<Value = Vec<u8>> {
    let payload = prop_oneof![
        "[A-Za-z0-9._:/-]{0,12}".prop_map(String::into_bytes),
        any::<String>().prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    let wire = prop_oneof![4 => Just(2u8), 2 => Just(0), 1 => 0u8..8];
    let field = (1u8..=8, wire, payload, any::<u64>()).prop_map(|(number, wire, payload, n)| {
        let mut out = vec![(number << 3) | wire];
        match wire {
            0 => out.extend(mutate::varint(n)),
            2 => {
                out.extend(mutate::varint(payload.len() as u64));
                out.extend(payload);
            }
            1 => out.extend(n.to_le_bytes()),
            5 => out.extend(&n.to_le_bytes()[..4]),
            _ => out.extend(payload),
        }
        out
    });
    prop_oneof![
        4 => proptest::collection::vec(field, 0..6).prop_map(|fields| fields.concat()),
        1 => proptest::collection::vec(any::<u8>(), 0..128),
    ]
}

#[test]
fn arbitrary_bytes_decoded_as_any_request_are_served_or_refused_naming_a_field() {
    let harness = Harness::new();
    let pool = mutate::pool();
    let (decoded, refused) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let strategy = (0..KINDS.len(), message_bytes());
    let result = runner(3000).run(&strategy, |(kind, bytes)| {
        let kind = KINDS[kind];
        let Some(answer) = harness.call(kind, &bytes) else {
            return Ok(());
        };
        decoded.set(decoded.get() + 1);
        let invalid = matches!(&answer, Err(s) if s.code() == Code::InvalidArgument);
        refused.set(refused.get() + u32::from(invalid));
        check(kind, answer, &mutate::field_names(&pool, kind))
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    let (decoded, refused) = (decoded.get(), refused.get());
    println!("arbitrary bytes: {decoded} decoded, {refused} of them INVALID_ARGUMENT");
    assert!(decoded > 300, "too few cases decoded to judge: {decoded}");
}

#[test]
fn a_valid_request_with_one_field_mutated_is_served_or_refused_naming_that_field() {
    let harness = Harness::new();
    let pool = mutate::pool();
    for kind in KINDS {
        let valid = mutate::valid(kind);
        let answer = harness.call(kind, &valid).expect("a valid request decodes");
        assert!(
            !matches!(&answer, Err(s) if s.code() == Code::InvalidArgument),
            "the valid {kind} is refused: {answer:?}"
        );
    }
    let refused = std::cell::Cell::new(0u32);
    let strategy = (
        0..KINDS.len(),
        any::<prop::sample::Index>(),
        mutate::mutation(),
    );
    let result = runner(2000).run(&strategy, |(kind, pick, mutation)| {
        let kind = KINDS[kind];
        let (field, bytes) = mutate::apply(&pool, kind, pick, &mutation);
        let answer = harness
            .call(kind, &bytes)
            .expect("a mutated request decodes");
        refused.set(refused.get() + u32::from(answer.is_err()));
        check(kind, answer, &[field])
    });
    result.unwrap_or_else(|e| panic!("{e}"));
    println!("near-valid: {} of 2000 refused", refused.get());
}
