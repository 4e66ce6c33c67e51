//! The Go module (`clients/go`: packages `claimd` and `claimdhttp`) against the real claimd:
//! `go vet ./...`, then its own `go test -race ./...` against the four claimds of
//! [`ClientServers`] (every behaviour on the embedded store and on PostgreSQL, an API key,
//! mutual TLS; the Idempotency-Key middleware through real `net/http` servers), read from
//! `go test -json` so that a test that did not run, or skipped, fails here (among them
//! `TestTheCommittedGeneratedCodeMatchesTheProto`, which runs the generator's `-check`:
//! the committed `claimdv1` against a fresh generation from `proto/`). Besides: the suite
//! failing (not skipping) without its claimds, and every Go snippet of docs/CLIENTS.md and
//! the README compiled and vetted against the module.
//!
//! Go comes from the machine (1.26 or newer; the README's test command says so when it is
//! missing); modules come from the Go module proxy on first use and stay in Go's cache.

use super::client_servers::{ClientServers, clear_claimd_env};
use super::tools;
use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

/// The oldest Go the module builds with (its go.mod's `go` line).
const MIN_GO: (u32, u32) = (1, 26);

/// `clients/go` in the checkout.
fn module() -> PathBuf {
    tools::repo().join("clients/go")
}

/// Fails with what to install unless `go` is there and new enough.
fn require_go() {
    let hint = "install Go 1.26 or newer (Debian's golang-go is older: take the Go \
                toolchain's own release) and put `go` on PATH";
    let found = Command::new("go").arg("version").output();
    let text = match found {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        _ => panic!("`go` is needed by the Go client tests; {hint}"),
    };
    // "go version go1.26.8 linux/amd64"
    let version = text
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("go")
                .filter(|v| v.starts_with(char::is_numeric))
        })
        .unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    assert!(
        found >= MIN_GO,
        "the Go client tests need Go {}.{}+, found `{}`; {hint}",
        MIN_GO.0,
        MIN_GO.1,
        text.trim()
    );
}

/// `go <args>` in `dir`, with the machine's own toolchain and none of the test process's
/// `CLAIMD_*` variables.
fn go_in(dir: &std::path::Path, args: &[&str]) -> Command {
    require_go();
    let mut cmd = Command::new("go");
    cmd.args(args)
        .current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        .env_remove("GOFLAGS");
    clear_claimd_env(&mut cmd);
    cmd
}

/// What `go test -json` said of each test: its last action (`pass`, `fail`, `skip`).
fn test_results(output: &Output) -> BTreeMap<String, String> {
    let mut results = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(test), Some(action)) = (event["Test"].as_str(), event["Action"].as_str()) else {
            continue;
        };
        if matches!(action, "pass" | "fail" | "skip") {
            results.insert(test.to_owned(), action.to_owned());
        }
    }
    results
}

/// The printed output of `go test -json` (its `output` events), for a failure report.
fn printed(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|event| event["Output"].as_str().map(str::to_owned))
        .collect()
}

/// Tests of the suite that must pass on every run (each has an `embedded` and a `postgres`
/// subtest where it talks to a store).
const REQUIRED: &[&str] = &[
    "TestVersionFollowsTheProtoVersion",
    "TestTheCommittedGeneratedCodeMatchesTheProto",
    "TestAFirstClaimIsClaimedAndADuplicateIsInFlight",
    "TestACompletedClaimReplaysItsStoredResponse",
    "TestARetriedClaimIsRetryScheduledUntilItIsDue",
    "TestAQuarantinedClaimIsQuarantined",
    "TestTheSameKeyWithAnotherFingerprintIsAConflict",
    "TestAWaitingClaimGetsTheResponseOnceTheHolderCompletes",
    "TestTheHeartbeatKeepsAShortLeaseAlivePastItsLength",
    "TestATakeoverIsReportedThroughLost",
    "TestASettleOfALeaseTakenOverFailsAndReportsLost",
    "TestALeaseSettlesOnlyOnce",
    "TestClosingAnUnsettledLeaseGivesTheClaimBack",
    "TestALeasePrintsWithoutItsToken",
    "TestErrorsNameTheInvalidField",
    "TestAWrongAPIKeyIsUnauthenticated",
    "TestAnAPIKeyIsSentWithEveryCall",
    "TestMutualTLSWithAnAPIKeyWorks",
    "TestCanonicalJSONAndFingerprintsAreTheNodePackagesBytes",
    "TestKeysParseAndClaimKeysAreBuiltAsInTheNodePackage",
    "TestStoredResponsesAreTheBytesTheNodeAndPythonPackagesStore",
    "TestAResponseTheNodeOrPythonPackageStoredIsReplayed",
    "TestAUsedUpKeyIs422",
    "TestAHandlerThatAnsweredNeverRunsAgainAndItsResponseIsReplayed",
    "TestTwentyConcurrentIdenticalRequestsRunTheHandlerOnceAndAllGetItsAnswer",
    "TestServerErrorsAreReplayedLikeAnyResponse",
    "TestWithRetryServerErrorsAServerErrorGivesTheKeyBack",
    "TestTheSameKeyWithAnotherBodyOrOnAnotherRouteIs422",
    "TestARequestWithoutAKeyOrWithAnInvalidKeyIs400",
    "TestFreeFormKeysWithSpacesAndQuotedStringsAreOneKey",
    "TestARequestStillInFlightPastTheWaitIs409WithRetryAfter",
    "TestAnUnreachableClaimdIs503WithRetryAfter",
    "TestAPanickingHandlerGivesTheKeyBackSoTheNextRequestRunsIt",
    "TestAResponseTooLargeToStoreStillSettlesTheKey",
    "TestABodyLargerThanTheLimitIs413",
    "TestClosingTheClientEndsTheHeartbeatGoroutineOfEveryLease",
    "TestACheckpointRacingACompleteNeverReportsTheSettledLeaseLost",
    "TestACheckpointAfterASettleIsErrSettledWithoutCallingClaimd",
    "TestAReplayHasExactlyOneContentTypeAndReplacesHeadersSetBeforeIt",
    "TestAReplayOfANodeStoredResponseHasExactlyOneContentType",
    "TestAClientThatDisconnectsDoesNotCancelTheHandlerAndItsRetryGetsTheRealAnswer",
    "TestARequestWhoseContextEndsWhileWaitingForADueRetryIs503WithRetryAfter",
    "TestABodyCutByAnOuterMaxBytesReaderIs413",
    "TestHeadersChangedAfterWriteHeaderAreNeitherSentNorStored",
    "TestAnInvalidStatusCodeIsStoredAndReplayedAs500WithoutPanicking",
    "TestAHandlerCanSetItsDeadlinesThroughAResponseController",
    "TestAPanicValueReachesOuterMiddlewareUnchangedErrAbortHandlerToo",
    "TestAKeyGivenBackRunsAgainAfterOneSecondByDefault",
    "TestInvalidOptionsPanicAtConstructionNamingTheOption",
    // Issue 40: the default scope, what is never stored, chi and gorilla `r.Use`.
    "TestWithoutAClientFunctionTheClientIsTheAuthorizationDigestElseTheSessionCookieDigestElseAnonymous",
    "TestAuthorizationLinesAreJoinedInOrderAndComeBeforeTheSessionCookie",
    "TestTheSessionCookieIsItsFirstValueAsSentOnAnyCookieLine",
    "TestStoredHeadersLeaveOutSetCookieHopByHopAndWhatConnectionNames",
    "TestTwoUsersWithTheSameKeyAndBodyEachRunTheHandlerAndNeverGetTheOthersResponse",
    "TestTwoSessionCookiesWithTheSameKeyAndBodyEachRunTheHandlerAndNeverGetTheOthersResponse",
    "TestASetCookieGoesToItsCallerOnlyAndNoHopByHopHeaderIsReplayed",
    "TestWithRouterUseTwentyConcurrentRequestsWithOneKeyRunTheHandlerOnceAndAllGetItsAnswer",
    "TestWithRouterUseAServerErrorIsStoredAndReplayed",
    "TestWithRouterUseTheSameKeyWithAnotherBodyOrOnAnotherRouteIs422",
    "TestWithRouterUseARequestWithoutAKeyIs400",
    "TestWithRouterUseAnUnreachableClaimdIs503AndTheHandlerDoesNotRun",
    "TestTheRoutersAreDependenciesOfTheTestsOnly",
    // Issue 43: the typed quota error, and a RESOURCE_EXHAUSTED that is no quota (a request
    // over the real claimd's size limit) staying the plain error.
    "TestAClaimOverTheTenantQuotaIsAQuotaErrorWithTheQuotaAndAPositiveRetryDelay",
    "TestAResourceExhaustedWithoutQuotaDetailsIsAPlainError",
    "TestARequestOverClaimdsSizeLimitIsAPlainResourceExhaustedErrorNotAQuotaError",
];

#[tokio::test]
async fn the_go_module_passes_go_vet_and_its_suite_on_both_stores_with_a_key_and_mutual_tls() {
    let servers = ClientServers::start().await;
    let env = servers.env();
    // On a blocking thread: vetting, building and the suite take a while.
    let run = tokio::task::spawn_blocking(move || {
        tools::run(
            &mut go_in(&module(), &["vet", "./..."]),
            "go vet ./... in clients/go",
        );
        // With the race detector: leases, heartbeats and the middleware are concurrent code.
        let mut cmd = go_in(&module(), &["test", "-race", "-json", "-count=1", "./..."]);
        cmd.envs(env);
        // Not tools::run: a failing suite's report is its printed output, not the JSON.
        let output = cmd.output().expect("`go test` starts");
        (
            output.status.success(),
            printed(&output),
            test_results(&output),
        )
    });
    let (passed, report, results) = match run.await {
        Ok(done) => done,
        Err(failed) => std::panic::resume_unwind(failed.into_panic()),
    };
    if !passed {
        eprintln!("{}", servers.logs());
        panic!("go test ./... in clients/go failed:\n{report}");
    }
    let skipped: Vec<&String> = results
        .iter()
        .filter(|(_, action)| *action == "skip")
        .map(|(test, _)| test)
        .collect();
    assert!(
        skipped.is_empty(),
        "the Go suite skipped {skipped:?}:\n{report}"
    );
    // A test that runs on the embedded store runs on PostgreSQL too.
    for test in results.keys() {
        if let Some(name) = test.strip_suffix("/embedded") {
            assert_eq!(
                results.get(&format!("{name}/postgres")).map(String::as_str),
                Some("pass"),
                "{name} ran on the embedded store but did not pass on PostgreSQL:\n{report}"
            );
        }
    }
    for test in REQUIRED {
        assert_eq!(
            results.get(*test).map(String::as_str),
            Some("pass"),
            "{test} did not pass:\n{report}"
        );
    }
}

/// Without the variables of [`ClientServers`] the suite fails, naming who sets them: a
/// machine without claimd never passes it by skipping.
#[test]
fn the_go_suite_without_its_claimds_fails_rather_than_skips() {
    let output = go_in(
        &module(),
        &[
            "test",
            "-json",
            "-count=1",
            "-run",
            "^TestAFirstClaimIsClaimedAndADuplicateIsInFlight$",
            ".",
        ],
    )
    .output()
    .expect("`go test` starts");
    let report = printed(&output);
    assert!(
        !output.status.success(),
        "the suite passed without claimd:\n{report}"
    );
    assert!(
        report.contains("CLAIMD_EMBEDDED_ADDR is not set")
            && report.contains("cargo test --test it polyglot::clients_go"),
        "the suite did not say what was missing:\n{report}"
    );
    let results = test_results(&output);
    assert!(
        results.values().all(|action| action != "skip"),
        "the suite skipped instead of failing: {results:?}"
    );
}

#[test]
fn every_go_snippet_of_the_docs_compiles_and_passes_go_vet_against_the_module() {
    let snippets = tools::doc_snippets("go");
    assert!(
        !snippets.is_empty(),
        "docs/CLIENTS.md has no ```go block: the Go section lost its examples"
    );
    // The snippets' module lives in a fresh directory of its own.
    let dir = tempfile::tempdir().expect("temp dir");
    let go_mod = format!(
        "module example.com/snippets\n\ngo {}.{}\n\nrequire claimd.dev/go/claimd v{}\n\n\
         replace claimd.dev/go/claimd => {}\n",
        MIN_GO.0,
        MIN_GO.1,
        fs::read_to_string(tools::repo().join("proto/VERSION"))
            .expect("proto/VERSION")
            .trim(),
        module().display()
    );
    fs::write(dir.path().join("go.mod"), go_mod).expect("write go.mod");
    // The module's own checksums cover every module a snippet can import through it.
    fs::copy(module().join("go.sum"), dir.path().join("go.sum")).expect("copy go.sum");
    for (i, (place, snippet)) in snippets.iter().enumerate() {
        assert!(
            snippet.starts_with("package "),
            "the Go snippet at {place} is not a whole file (it must start with `package`, \
             so that it compiles as written):\n{snippet}"
        );
        let package = dir.path().join(format!("snippet{}", i + 1));
        fs::create_dir(&package).expect("create the snippet's package directory");
        fs::write(package.join("main.go"), snippet).expect("write the snippet");
    }
    tools::run(
        go_in(dir.path(), &["mod", "tidy"]).env("GOFLAGS", "-mod=mod"),
        "go mod tidy of the docs' Go snippets",
    );
    tools::run(
        &mut go_in(dir.path(), &["vet", "./..."]),
        "go vet of the docs' Go snippets",
    );
    tools::run(
        &mut go_in(dir.path(), &["build", "./..."]),
        "go build of the docs' Go snippets",
    );
}
