//! The README quickstart, run the way a new user runs it: `claimd` with no flags and no
//! `CLAIMD_*` variables in an empty directory, then every grpcurl call of README.md's
//! "Try it with grpcurl" block (found by [`crate::common::readme::section`]). The block is parsed at test time and each call is made the
//! way grpcurl makes it (JSON → request through the descriptors, response → JSON), so the
//! README and this test cannot drift apart. No grpcurl needed.

use crate::common::process::{Claimd, claimd};
use claimd::pb::{self, claim_service_client::ClaimServiceClient};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_json::{Value, json};
use std::collections::HashMap;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1alpha::{
    ServerReflectionRequest, server_reflection_response::MessageResponse,
};

const SECTION: &str = "Try it with grpcurl";
const ADDRESS: &str = "localhost:50051";
const CLAIM: &str = "claimd.v1.ClaimService/Claim";
const COMPLETE: &str = "claimd.v1.ClaimService/Complete";
const ORPHANED: &str = "claimd.v1.ClaimService/ListOrphaned";
const HEALTH: &str = "grpc.health.v1.Health/Check";
/// The walkthrough this test asserts on; a changed README must change this too.
const WALKTHROUGH: [&str; 8] = [
    "list", CLAIM, CLAIM, CLAIM, COMPLETE, CLAIM, ORPHANED, HEALTH,
];

/// One grpcurl invocation of the README; `$NAME` is kept as `\0NAME\0` until it runs.
#[derive(Debug)]
struct Call {
    /// Where the README prints it: `README.md line 12`.
    at: String,
    method: String,
    body: String,
    /// `NAME=$(grpcurl … | sed -n 's/.*"FIELD": "\(.*\)".*/\1/p')`: (NAME, FIELD).
    capture: Option<(String, String)>,
    /// The outputs the preceding comment promises (`DECISION_*`, `STATE_*`, `SERVING`).
    promises: Vec<String>,
}

fn readme_calls() -> Vec<Call> {
    let commands = crate::common::readme::section(SECTION)
        .into_iter()
        .map(|cmd| {
            let mut call = parse_call(&cmd.text)
                .unwrap_or_else(|e| panic!("{}: {e}\n> {}", cmd.at(), cmd.text));
            (call.at, call.promises) = (cmd.at(), cmd.promises);
            call
        });
    commands.collect()
}

fn parse_call(text: &str) -> Result<Call, String> {
    let (var, command) = match text.split_once("=$(") {
        Some((name, rest)) if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => (
            Some(name.to_owned()),
            rest.strip_suffix(')').ok_or("`$(` without `)`")?,
        ),
        _ => (None, text),
    };
    let words = shell_words(command)?;
    let mut pipeline = words.split(|w| w == "|");
    let grpcurl = pipeline.next().unwrap_or_default();
    let capture = match (var, pipeline.next(), pipeline.next()) {
        (None, None, _) => None,
        (Some(var), Some([sed, n, script]), None) if sed == "sed" && n == "-n" => {
            let field = script.strip_prefix("s/.*\"");
            let field = field.and_then(|s| s.strip_suffix("\": \"\\(.*\\)\".*/\\1/p"));
            let field = field.ok_or(format!("a sed script this test cannot emulate: {script}"))?;
            Some((var, field.to_owned()))
        }
        _ => return Err("only `NAME=$(grpcurl … | sed -n 's/…/\\1/p')` pipelines".into()),
    };
    let (mut plaintext, mut body, mut positional) = (false, "{}".to_owned(), Vec::new());
    let mut args = grpcurl.iter().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-plaintext" => plaintext = true,
            "-d" => body = args.next().ok_or("-d without a value")?.clone(),
            flag if flag.starts_with('-') => return Err(format!("unknown grpcurl flag {flag}")),
            _ => positional.push(arg.clone()),
        }
    }
    let usage = format!("expected `grpcurl -plaintext [-d BODY] {ADDRESS} METHOD`");
    match (grpcurl.first().map(String::as_str), &positional[..]) {
        (Some("grpcurl"), [address, method]) if plaintext && address == ADDRESS => {
            let (at, method) = (String::new(), method.to_owned());
            Ok(Call {
                at,
                method,
                body,
                capture,
                promises: Vec::new(),
            })
        }
        _ => Err(usage),
    }
}

/// Splits a command line as sh does for what the README uses: '…', "…" (with `\"`, `\\`,
/// `\$` and `$NAME`), `\x`, `$NAME` and `|`; anything else sh would treat specially fails.
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let (mut words, mut word, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    let var = |chars: &mut std::iter::Peekable<std::str::Chars>| -> Result<String, String> {
        let name = std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_'));
        let name: String = name.collect();
        (!name.is_empty())
            .then(|| format!("\0{name}\0"))
            .ok_or("a lone `$`".into())
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '|' => {
                if std::mem::take(&mut in_word) {
                    words.push(std::mem::take(&mut word));
                }
                words.extend((c == '|').then(|| "|".to_owned()));
                continue;
            }
            '\'' => loop {
                match chars.next().ok_or("unterminated '")? {
                    '\'' => break,
                    c => word.push(c),
                }
            },
            '"' => loop {
                match chars.next().ok_or("unterminated \"")? {
                    '"' => break,
                    '$' => word.push_str(&var(&mut chars)?),
                    '\\' => match chars.next().ok_or("unterminated \"")? {
                        c @ ('"' | '\\' | '$') => word.push(c),
                        c => word.extend(['\\', c]),
                    },
                    '`' => return Err("backquotes are not supported".into()),
                    c => word.push(c),
                }
            },
            '\\' => word.push(chars.next().ok_or("a trailing backslash")?),
            '$' => word.push_str(&var(&mut chars)?),
            c if ";&<>()`*?[]#~".contains(c) => return Err(format!("unsupported shell: {c}")),
            c => word.push(c),
        }
        in_word = true;
    }
    words.extend(in_word.then_some(word));
    Ok(words)
}

/// Replaces `\0NAME\0` with the value the README's shell would have assigned to NAME.
fn expand(text: &str, vars: &HashMap<String, String>) -> Result<String, String> {
    let mut parts = text.split('\0');
    let mut out = parts.next().unwrap_or_default().to_owned();
    while let (Some(name), Some(rest)) = (parts.next(), parts.next()) {
        let value = vars
            .get(name)
            .ok_or(format!("${name} is used before it is set"))?;
        out = out + value + rest;
    }
    Ok(out)
}

/// Makes one call as grpcurl does: JSON → request via the method's descriptor, the call,
/// response → JSON (camelCase names, enum names, base64 bytes, defaults left out).
async fn invoke(
    chan: &Channel,
    pool: &DescriptorPool,
    method: &str,
    body: &str,
) -> Result<Value, String> {
    let status = |s: tonic::Status| format!("{method} failed: {} {}", s.code(), s.message());
    if method == "list" {
        let list = MessageRequest::ListServices(String::new());
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(list),
        };
        let mut client = ServerReflectionClient::new(chan.clone());
        let answers = client.server_reflection_info(tokio_stream::iter([request]));
        let answer = answers.await.map_err(status)?.into_inner().message().await;
        return match answer.map_err(status)?.and_then(|a| a.message_response) {
            Some(MessageResponse::ListServicesResponse(l)) => {
                Ok(json!(l.service.iter().map(|s| &s.name).collect::<Vec<_>>()))
            }
            other => Err(format!("reflection answered {other:?}")),
        };
    }
    let (service, name) = method.split_once('/').ok_or("not Service/Method")?;
    let service = pool.get_service_by_name(service).ok_or("no such service")?;
    let rpc = service
        .methods()
        .find(|m| m.name() == name)
        .ok_or("no such method")?;
    let mut json = serde_json::Deserializer::from_str(body);
    let request = DynamicMessage::deserialize(rpc.input(), &mut json);
    let request = request
        .and_then(|r| json.end().map(|()| r))
        .map_err(|e| format!("-d: {e}"))?;
    let bytes = request.encode_to_vec();
    macro_rules! call {
        ($client:ident, $rpc:ident, $request:ty) => {{
            let request = <$request>::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
            let answer = $client::new(chan.clone()).$rpc(request).await;
            answer.map_err(status)?.into_inner().encode_to_vec()
        }};
    }
    let answer = match method {
        CLAIM => call!(ClaimServiceClient, claim, pb::ClaimRequest),
        COMPLETE => call!(ClaimServiceClient, complete, pb::CompleteRequest),
        ORPHANED => call!(ClaimServiceClient, list_orphaned, pb::ListOrphanedRequest),
        HEALTH => call!(HealthClient, check, HealthCheckRequest),
        other => return Err(format!("this test does not know how to call {other} yet")),
    };
    let answer = DynamicMessage::decode(rpc.output(), answer.as_slice());
    serde_json::to_value(answer.map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

/// What `sed -n 's/.*"FIELD": "\(.*\)".*/\1/p'` prints for grpcurl's indented JSON output.
fn sed_capture(output: &Value, field: &str) -> String {
    let printed = serde_json::to_string_pretty(output).expect("JSON prints");
    let needle = format!("\"{field}\": \"");
    let matched = printed.lines().filter_map(|l| {
        let rest = &l[l.rfind(&needle)? + needle.len()..];
        Some(&rest[..rest.rfind('"')?])
    });
    matched.collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn the_readme_grpcurl_walkthrough_works_against_claimd_started_with_no_flags() {
    let calls = readme_calls();
    let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
    let listing = calls.iter().map(|c| format!("\n{}: {}", c.at, c.method));
    let listing: String = listing.collect();
    let changed = "README.md's grpcurl walkthrough changed; update this test with it";
    assert_eq!(methods, WALKTHROUGH, "{changed}:{listing}");

    if let Err(e) = std::net::TcpListener::bind("127.0.0.1:50051") {
        panic!("127.0.0.1:50051, claimd's default port, is in use ({e}); this test needs it free");
    }
    let cwd = tempfile::tempdir().expect("temp dir");
    let mut cmd = claimd();
    cmd.current_dir(cwd.path());
    let server = Claimd::start(cmd, "127.0.0.1:50051".parse().unwrap()).await;
    let endpoint = Endpoint::from_static("http://localhost:50051");
    let channel = endpoint
        .connect()
        .await
        .expect("connects to localhost:50051");
    let mut pool = DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("claimd descriptors");
    let health = pool.decode_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    health.expect("health descriptors");

    let (mut vars, mut requests, mut outputs) = (HashMap::new(), Vec::new(), Vec::new());
    for call in &calls {
        let at = &call.at;
        let fail = |e: String| -> ! { panic!("{at}: {e}\n{}", server.log()) };
        let body = expand(&call.body, &vars).unwrap_or_else(|e| fail(e));
        let output = invoke(&channel, &pool, &call.method, &body).await;
        let output = output.unwrap_or_else(|e| fail(e));
        for promise in &call.promises {
            let printed = format!("{output:#}");
            let said = printed.contains(&format!("{promise}\""));
            assert!(said, "{at} promises {promise}: {printed}");
        }
        if let Some((var, field)) = &call.capture {
            vars.insert(var.clone(), sed_capture(&output, field));
        }
        requests.push(serde_json::from_str::<Value>(&body).unwrap_or_default());
        outputs.push(output);
    }

    let services = outputs[0].as_array().cloned().unwrap_or_default();
    let listed = |s: &str| services.contains(&json!(s));
    assert!(
        listed("claimd.v1.ClaimService") && listed("grpc.health.v1.Health"),
        "{services:?}"
    );
    let token = json!(vars["TOKEN"]);
    assert!(token != json!(""), "$TOKEN is empty");
    let (first, complete) = (&requests[1], &requests[4]);
    assert_eq!(complete["claim_token"], token, "Complete presents $TOKEN");
    let promised = [
        (1, "/decision", json!("DECISION_CLAIMED")),
        (
            1,
            "/receipt/recoveryPayload",
            first["recovery_payload"].clone(),
        ),
        (2, "/decision", json!("DECISION_IN_FLIGHT")),
        (3, "/decision", json!("DECISION_CLAIMED")),
        (3, "/claimToken", token),
        (4, "/receipt/state", json!("STATE_COMPLETED")),
        (5, "/decision", json!("DECISION_COMPLETED")),
        (5, "/receipt/response", complete["response"].clone()),
        (7, "/status", json!("SERVING")),
    ];
    for (i, field, want) in promised {
        let (at, got) = (&calls[i].at, &outputs[i]);
        assert_eq!(got.pointer(field), Some(&want), "{at}: {field} in {got}");
    }
    assert!(outputs[6].is_object(), "ListOrphaned: {}", outputs[6]);

    let db = cwd.path().join("claimd-data").join("claimd.db");
    assert!(db.is_file(), "no {}", db.display());
    let status = server.terminate().await;
    assert!(status.success(), "claimd exited {status} on SIGTERM");
}
