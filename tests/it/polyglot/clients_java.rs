//! The Java library (`clients/java`: Maven artifact `dev.claimd:claimd-client`, the client
//! in `dev.claimd` and the Jakarta Servlet filter in `dev.claimd.servlet`) against the real
//! claimd: `mvn verify` (compiled with warnings as errors) runs its own JUnit suite against
//! the four claimds of [`ClientServers`] (every behaviour on the embedded store and on
//! PostgreSQL, an API key, mutual TLS; the Idempotency-Key filter in an embedded Jetty over
//! real HTTP; the Spring Boot auto-configuration in a Spring Boot app on Tomcat started with
//! properties only), and surefire's reports are read so that a test that did not run, or was
//! skipped, fails here. Besides: the committed generated code against a fresh generation
//! from `proto/`, the suite failing (not skipping) without its claimds, and every Java
//! snippet of docs/CLIENTS.md compiled with `-Xlint:all -Werror` against the library.
//!
//! Java 17 and Maven come from the machine (the README's test command installs them when
//! missing); Maven fetches the project's dependencies on first use into its local
//! repository. Maven builds in `clients/java/target`, one build at a time.

use super::client_servers::{ClientServers, clear_claimd_env};
use super::tools;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// `clients/java` in the checkout.
fn project() -> PathBuf {
    tools::repo().join("clients/java")
}

/// One Maven build of the project at a time: they share `clients/java/target`.
fn maven_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A test that panicked while holding it leaves nothing half-built that matters here.
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Fails with what to install unless `program -version` runs.
fn require(program: &str, flag: &str, hint: &str) -> String {
    match Command::new(program).arg(flag).output() {
        Ok(out) if out.status.success() => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            text
        }
        _ => panic!("`{program}` is needed by the Java client tests; {hint}"),
    }
}

/// Fails with what to install unless a JDK 17+ and Maven are there.
fn require_java() {
    let hint =
        "install a JDK 17+ and Maven (Debian: apt-get install openjdk-17-jdk-headless maven)";
    let javac = require("javac", "-version", hint);
    let major = javac
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    assert!(
        major.is_some_and(|m| m >= 17),
        "the Java client tests need JDK 17+, found `{}`; {hint}",
        javac.trim()
    );
    require("mvn", "-version", hint);
}

/// `mvn -B -q <args>` in the project, with none of the test process's `CLAIMD_*` variables.
fn mvn(args: &[&str]) -> Command {
    require_java();
    let mut cmd = Command::new("mvn");
    cmd.args(["-B", "-q", "-Dstyle.color=never"])
        .args(args)
        .current_dir(project());
    clear_claimd_env(&mut cmd);
    cmd
}

/// One test case of a surefire report.
#[derive(Debug)]
struct Case {
    class: String,
    name: String,
    skipped: bool,
}

/// Every test case of the surefire XML reports under `dir`.
fn surefire_cases(dir: &Path) -> Vec<Case> {
    let attribute = |tag: &str, name: &str| -> String {
        let start = format!("{name}=\"");
        tag.find(&start)
            .map(|at| {
                let rest = &tag[at + start.len()..];
                rest[..rest.find('"').unwrap_or(rest.len())].to_owned()
            })
            .unwrap_or_default()
    };
    let mut cases = Vec::new();
    // After a passing `mvn verify` the reports directory exists.
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        // A directory listing that started does not fail midway on a local disk.
        let path = entry.expect("directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !(name.starts_with("TEST-") && name.ends_with(".xml")) {
            continue;
        }
        // Surefire wrote it a moment ago.
        let xml = fs::read_to_string(&path).expect("surefire report");
        for chunk in xml.split("<testcase ").skip(1) {
            let tag = &chunk[..chunk.find('>').unwrap_or(chunk.len())];
            let body = &chunk[..chunk.find("</testcase>").unwrap_or(chunk.len())];
            cases.push(Case {
                class: attribute(tag, "classname"),
                name: attribute(tag, "name"),
                skipped: body.contains("<skipped"),
            });
        }
    }
    cases
}

/// `Class.method` of tests that must pass on every run (each that talks to a store runs
/// once per store: `[1]` embedded, `[2]` PostgreSQL).
const REQUIRED: &[&str] = &[
    "ClaimsTest.theFirstCallerIsClaimedAndLaterOnesGetTheStoredResponse",
    "ClaimsTest.aSecondCallerIsToldInFlightWhileTheLeaseIsHeld",
    "ClaimsTest.aRetriedClaimIsScheduledUntilItsRetryIsDue",
    "ClaimsTest.aQuarantinedEventIsADeadLetter",
    "ClaimsTest.theSameKeyWithAnotherFingerprintIsAConflict",
    "ClaimsTest.aLeaseSettlesOnlyOnce",
    "ClaimsTest.closingAnUnsettledLeaseGivesTheClaimBack",
    "ClaimsTest.aCheckpointIsKeptWithTheReceipt",
    "ClaimsTest.heartbeatsKeepAShortLeaseAlivePastItsLength",
    "ClaimsTest.aTakeoverIsReportedThroughIsLost",
    "ClaimsTest.aWaitingClaimGetsTheResponseOnceTheHolderCompletes",
    "ErrorsTest.anEmptyNamespaceIsInvalidArgumentNamingTheField",
    "ErrorsTest.anEmptyKeyIsInvalidArgumentNamingTheField",
    "ErrorsTest.aFingerprintLongerThan64BytesIsInvalidArgumentNamingTheField",
    "ErrorsTest.anUnknownReceiptIsNotFound",
    "SecurityTest.theApiKeyIsSentWithEveryCall",
    "SecurityTest.aWrongApiKeyIsUnauthenticated",
    "SecurityTest.noApiKeyIsUnauthenticatedWhereOneIsRequired",
    "SecurityTest.mutualTlsWithAnApiKeyClaimsAndCompletes",
    "VersionTest.theVersionIsTheProtosVersion",
    "VersionTest.theGeneratedStubIsClaimdV1ClaimService",
    "IdempotencyFilterTest.aHandlerThatAnsweredNeverRunsAgain",
    "IdempotencyFilterTest.twentyConcurrentIdenticalRequestsRunTheHandlerOnce",
    "IdempotencyFilterTest.aServerErrorIsReplayedToo",
    "IdempotencyFilterTest.withRetryServerErrorsAServerErrorGivesTheKeyBack",
    "IdempotencyFilterTest.theSameKeyWithAnotherBodyOrRouteIs422",
    "IdempotencyFilterTest.freeFormKeysAreClaimedUnderTheClientAndTheKey",
    "FilterRefusalsTest.aRequestWithoutAKeyOrWithAnInvalidOneIs400",
    "FilterRefusalsTest.withoutRequiredARequestWithoutAKeyRunsUnclaimed",
    "FilterRefusalsTest.aRetryPastTheWaitIs409WithRetryAfter",
    "FilterRefusalsTest.anUnreachableClaimdIs503WithRetryAfter",
    "FilterRefusalsTest.aThrowingHandlerGivesTheKeyBackAndTheNextRequestRunsIt",
    "FilterRefusalsTest.aResponseTooLargeToStoreStillSettlesTheKey",
    "FilterRefusalsTest.aBodyPastTheLimitIs413",
    "FilterDecisionsTest.aRetryNotDueWithinTheWaitIs503WithRetryAfter",
    "FilterDecisionsTest.aQuarantinedKeyIs422UsedUp",
    "FilterDecisionsTest.aKeyCompletedWithoutAResponseIs422UsedUp",
    "FilterDecisionsTest.aResponseStoredByAnotherProcessIsReplayed",
    "NodeCompatibilityTest.canonicalJsonIsNodesCanonicalJson",
    "NodeCompatibilityTest.keysParseAsTheNodeMiddlewareParsesThem",
    "NodeCompatibilityTest.claimKeysAreTheNodeMiddlewaresClaimKeys",
    "NodeCompatibilityTest.fingerprintsAreTheNodeMiddlewaresFingerprints",
    "NodeCompatibilityTest.storedResponsesAreByteIdenticalToNodesAndDecodeBack",
    "LeaseLifecycleTest.closeAfterAFailedSettleGivesTheClaimBack",
    "LeaseLifecycleTest.aLeaseWhoseSettleFailedCanStillBeCompleted",
    "LeaseLifecycleTest.completeWithNullThrowsNullPointerExceptionAndLeavesTheLeaseOpen",
    "LeaseLifecycleTest.aLeaseIsNeverLostAfterASuccessfulCompleteEvenWithMillisecondHeartbeats",
    "LeaseLifecycleTest.twentyOneSecondLeasesOnOneClientAllOutliveTheirLease",
    "LeaseLifecycleTest.aHeartbeatsDeadlineIsTheIntervalOrTheCallTimeoutWhicheverIsSmaller",
    "LeaseLifecycleTest.aClaimOnAClosedClientThrowsIllegalStateExceptionWithoutCallingClaimd",
    "LeaseLifecycleTest.aClaimdExceptionMessageNeverHoldsTheSecretsItWasGiven",
    "SlowClaimdTest.twentyLeasesOnASlowClaimdEachKeepHeartbeatingWithoutWaitingForTheOthers",
    "FilterEdgeCasesTest.anAsynchronousHandlerFailsLoudlyAndItsKeyIsGivenBackNotStored",
    "FilterEdgeCasesTest.aHandlerThatFlushesThenThrowsIsStoredAndReplayedAndRunsOnce",
    "FilterEdgeCasesTest.sendErrorClearsTheBodyAndLaterWritesAreIgnored",
    "FilterEdgeCasesTest.aChunkedBodyPastTheLimitIs413",
    "FilterEdgeCasesTest.aForwardDispatchPassesStraightThroughTheFilter",
    "FilterEdgeCasesTest.invalidFilterOptionsThrowIllegalArgumentExceptionNamingTheOption",
    "FilterConnectionTest.aRefusedRequestsLateBodyIsReadSoTheNextRequestOnTheConnectionIsAnswered",
    // The default scope (issue 40): the shared vectors, and two credentials never share a
    // stored response; Set-Cookie and hop-by-hop headers are never stored.
    "DefaultScopeTest.theSharedVectorsGiveTheSharedClientsAndClaimKeys",
    "DefaultScopeTest.severalAuthorizationLinesAreDigestedJoinedWithACommaAndASpace",
    "DefaultScopeTest.theAuthorizationHeaderWinsOverTheSessionCookie",
    "DefaultScopeTest.theFirstSessionCookieWinsAndItsValueIsTakenAsSent",
    "DefaultScopeTest.aSessionCookieThatIsNoCookieNameOrComesWithClientOfIsRefusedByBuild",
    "FilterScopeTest.twoUsersWithTheSameKeyAndBodyEachRunTheirOwnHandler",
    "FilterScopeTest.twoSessionCookiesWithTheSameKeyAndBodyEachRunTheirOwnHandler",
    "FilterScopeTest.aStoredResponseNeverHoldsSetCookieOrHopByHopHeaders",
    "FilterScopeTest.aResponseStoredElsewhereWithSetCookieIsReplayedWithoutItOrItsHopByHopHeaders",
    // The Spring Boot auto-configuration: an app started with properties only, over real HTTP.
    "SpringBootRulesTest.twentyConcurrentRequestsWithOneKeyRunTheHandlerOnce",
    "SpringBootRulesTest.aServerErrorIsStoredAndReplayed",
    "SpringBootRulesTest.theSameKeyWithAnotherBodyOrRouteIs422",
    "SpringBootRulesTest.aMissingKeyIs400AndRoutesOutsideTheUrlPatternsAreNotClaimed",
    "SpringBootRulesTest.anUnreachableClaimdIs503WithRetryAfterAndTheHandlerDoesNotRun",
    "SpringBootScopeTest.twoBearerTokensWithTheSameKeyAndBodyEachRunTheirOwnHandler",
    "SpringBootScopeTest.twoSignedInUsersWithTheSameKeyAndBodyEachRunTheirOwnHandlerUnderTheirPrincipal",
    "SpringBootScopeTest.twoSessionCookiesWithTheSameKeyAndBodyEachRunTheirOwnHandler",
    "SpringBootScopeTest.setCookieAndHopByHopHeadersAreNeverStoredNorReplayed",
    "SpringBootBeansTest.anAppDefinedClaimsBeanIsUsedInsteadOfClaimdTarget",
    "SpringBootBeansTest.anAppDefinedFilterRegistrationReplacesTheAutoConfiguredOne",
    "SpringBootBeansTest.withoutANamespaceTheClaimsBeanIsRegisteredButNoFilter",
    "SpringBootBeansTest.aNamespaceWithoutClaimdTargetOrAClaimsBeanFailsTheStartSayingWhatIsMissing",
    "SpringBootBeansTest.anOutOfRangePropertyFailsTheStartNamingIt",
    "SpringBootDocsTest.everyPropertyTheDocsShowIsOneTheAutoConfigurationBinds",
    "SpringBootDocsTest.everyPropertyIsInTheReadmesTable",
    // Issue 43: the typed quota exception, and a RESOURCE_EXHAUSTED that is no quota (a
    // request over the real claimd's size limit) staying a plain ClaimdException.
    "QuotaTest.aClaimOverTheTenantQuotaIsAQuotaExceptionWithTheQuotaAndAPositiveRetryDelay",
    "QuotaTest.aResourceExhaustedWithoutQuotaDetailsIsAPlainClaimdException",
    "QuotaTest.aRequestOverClaimdsSizeLimitIsAPlainClaimdExceptionNotAQuotaException",
    "QuotaTest.aRequestOverClaimdsSizeLimitIsPlainEvenForATenantOverItsQuota",
];

#[tokio::test]
async fn the_java_library_builds_with_warnings_as_errors_and_passes_its_suite_against_real_claimds()
{
    let servers = ClientServers::start().await;
    let env = servers.env();
    // On a blocking thread: Maven builds and runs the suite.
    let run = tokio::task::spawn_blocking(move || {
        let _maven = maven_lock();
        let output = mvn(&["verify"]).envs(env).output().expect("`mvn` starts");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let passed = output.status.success();
        // Read under the lock: another Maven run would write over the reports.
        let cases = if passed {
            surefire_cases(&project().join("target/surefire-reports"))
        } else {
            Vec::new()
        };
        (passed, report, cases)
    });
    let (passed, report, cases) = match run.await {
        Ok(done) => done,
        Err(failed) => std::panic::resume_unwind(failed.into_panic()),
    };
    if !passed {
        eprintln!("{}", servers.logs());
        panic!("mvn verify in clients/java failed:\n{report}");
    }
    let skipped: Vec<&Case> = cases.iter().filter(|c| c.skipped).collect();
    assert!(skipped.is_empty(), "the Java suite skipped {skipped:?}");
    // A test run on the embedded store ([1]) runs on PostgreSQL ([2]) too.
    for case in cases.iter().filter(|c| c.name.ends_with("[1]")) {
        let second = format!("{}[2]", case.name.trim_end_matches("[1]"));
        assert!(
            cases
                .iter()
                .any(|c| c.class == case.class && c.name == second),
            "{}.{} ran on the embedded store but not on PostgreSQL",
            case.class,
            case.name
        );
    }
    for required in REQUIRED {
        let (class, method) = required.split_once('.').unwrap_or((required, ""));
        let ran: Vec<&Case> = cases
            .iter()
            .filter(|c| c.class.ends_with(class) && c.name.starts_with(method))
            .collect();
        assert!(!ran.is_empty(), "{required} did not run: {cases:?}");
    }
}

/// Without the variables of [`ClientServers`] the suite fails, naming who sets them: a
/// machine without claimd never passes it by skipping.
#[test]
fn the_java_suite_without_its_claimds_fails_rather_than_skips() {
    let _maven = maven_lock();
    let output = mvn(&[
        "verify",
        "-Dtest=ClaimsTest",
        "-Dsurefire.failIfNoSpecifiedTests=false",
    ])
    .output()
    .expect("`mvn` starts");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !output.status.success(),
        "the suite passed without claimd:\n{report}"
    );
    let cases = surefire_cases(&project().join("target/surefire-reports"));
    assert!(
        cases.iter().any(|c| c.class.ends_with("ClaimsTest")) && cases.iter().all(|c| !c.skipped),
        "the suite did not run (or skipped) its tests: {cases:?}\n{report}"
    );
    let reports = fs::read_dir(project().join("target/surefire-reports"))
        .expect("surefire reports")
        .filter_map(Result::ok)
        .filter_map(|entry| fs::read_to_string(entry.path()).ok())
        .collect::<String>();
    assert!(
        reports.contains("CLAIMD_EMBEDDED_ADDR is not set")
            && reports.contains("cargo test --test it polyglot::clients_java"),
        "the failures did not say what was missing:\n{report}"
    );
}

/// The committed generated code is what `gen.sh` makes of `proto/` now (protoc and the
/// grpc-java plugin at the versions the pom pins, fetched by Maven): a proto change
/// without `clients/java/gen.sh` fails here.
#[test]
fn the_committed_java_code_is_what_the_pinned_generators_make_of_proto() {
    let _maven = maven_lock();
    require_java();
    let mut cmd = Command::new(project().join("gen.sh"));
    cmd.arg("--check").current_dir(project());
    clear_claimd_env(&mut cmd);
    tools::run(&mut cmd, "clients/java/gen.sh --check");
}

/// Every Java snippet of docs/CLIENTS.md and the README compiles, as written, against the
/// library and its dependencies (the servlet API included) with `-Xlint:all -Werror`.
#[test]
fn every_java_snippet_of_the_docs_compiles_without_warnings_against_the_library() {
    let snippets = tools::doc_snippets("java");
    assert!(
        !snippets.is_empty(),
        "docs/CLIENTS.md has no ```java block: the Java section lost its examples"
    );
    // The classpath file and the compiled snippets live in a fresh directory.
    let dir = tempfile::tempdir().expect("temp dir");
    let classpath_file = dir.path().join("classpath.txt");
    {
        let _maven = maven_lock();
        tools::run(
            &mut mvn(&["compile"]),
            "mvn compile in clients/java (the snippets compile against its classes)",
        );
        tools::run(
            mvn(&["dependency:build-classpath", "-Dmdep.includeScope=compile"])
                .arg(format!("-Dmdep.outputFile={}", classpath_file.display())),
            "mvn dependency:build-classpath in clients/java",
        );
    }
    // Maven wrote it just now.
    let dependencies = fs::read_to_string(&classpath_file).expect("the classpath file");
    let classpath = format!(
        "{}:{}",
        project().join("target/classes").display(),
        dependencies.trim()
    );
    for (i, (place, snippet)) in snippets.iter().enumerate() {
        let source = dir.path().join(format!("snippet{}", i + 1));
        fs::create_dir(&source).expect("create the snippet's directory");
        // A public top-level type must live in a file of its name.
        let tokens: Vec<&str> = snippet.split_whitespace().collect();
        let name = (2..tokens.len())
            .find(|&i| {
                matches!(tokens[i - 1], "class" | "record" | "interface" | "enum")
                    && tokens[..i - 1].iter().rev().take(3).any(|t| *t == "public")
            })
            .map(|i| tokens[i].trim_end_matches(['{', '(', '<']).to_owned())
            .unwrap_or_else(|| format!("Snippet{}", i + 1));
        let file = source.join(format!("{name}.java"));
        fs::write(&file, snippet).expect("write the snippet");
        let out = source.join("classes");
        tools::run(
            Command::new("javac")
                .args([
                    "--release",
                    "17",
                    "-Xlint:all",
                    "-Werror",
                    "-proc:none",
                    "-d",
                ])
                .arg(&out)
                .arg("-cp")
                .arg(&classpath)
                .arg(&file),
            &format!("javac of the Java snippet at {place}"),
        );
    }
}
