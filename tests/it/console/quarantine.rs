//! The console's Quarantine of an orphan through its real HTTP interface, on both stores
//! (issue 46, items 5–7): one compare-and-set write on the receipt the page showed. A
//! budget-spent orphan is quarantined with the operator's reason and no attempt spent; a
//! receipt pruned since the page is NOT FOUND and nothing is inserted (the next delivery is
//! CLAIMED), one claimed anew is refused; a live lease, a stale attempt, a completed or a
//! quarantined receipt is refused 409 with the receipt exactly as before — no lease left
//! behind: its holder still completes with its token. Time moves with `app.advance`.

use super::operator::{NS, Operator, policies};
use super::page::{self, console_app, get, text};
use crate::common::app::{Backend, TestApp, secs};
use crate::common::http1::Answer;
use claimd::janitor::Pass;
use claimd::pb::{self, Decision, State};
use std::time::Duration;
use tonic::Code;

conformance!(
    a_budget_spent_orphan_is_quarantined_with_the_operators_reason_and_no_attempt_spent,
    a_receipt_pruned_since_its_page_is_not_found_nothing_is_inserted_and_its_next_delivery_is_claimed,
    a_live_lease_is_refused_and_its_holder_still_completes_with_its_token,
    a_due_retry_is_not_quarantined_when_the_forms_attempt_is_stale,
    a_completed_or_quarantined_receipt_is_refused_and_nothing_changes,
);

const DAY: Duration = Duration::from_secs(86_400);

/// A claimd with the console, [`NS`]'s policy and the background janitor off.
async fn app(backend: Backend) -> TestApp {
    console_app(backend, |c| {
        c.policies = policies();
        c.janitor.interval = Duration::ZERO;
    })
    .await
}

/// A refusal page: 409 (or `status`), "Not quarantined: …", `says`, "Nothing changed."
pub fn refused(answer: &Answer, status: u16, says: &str) {
    let body = text(answer);
    assert_eq!(answer.status, status, "{body}");
    assert!(body.contains("Not quarantined: "), "{body}");
    assert!(body.contains(says), "{says} in {body}");
    assert!(body.contains("Nothing changed."), "{body}");
}

async fn a_budget_spent_orphan_is_quarantined_with_the_operators_reason_and_no_attempt_spent(
    backend: Backend,
) {
    let app = app(backend).await;
    budget_spent_orphan_quarantined_on(&app).await;
}

/// The test above on `app` (built as [`app`] does; also run on Citus, `citus::surfaces`).
pub(crate) async fn budget_spent_orphan_quarantined_on(app: &TestApp) {
    let operator = Operator::new(app).await;
    let token = operator.claimed("ev-1", 1).await;
    app.advance(Duration::from_secs(2));
    let form = operator.form("ev-1").await;
    let reason = "handler hangs on this event; quarantined by the on-call";
    let answer = operator.quarantine(&form, reason).await;
    assert_eq!(answer.status, 303, "{}", text(&answer));
    let location = page::header(&answer, "location").expect("a redirect");
    assert!(location.contains("done=quarantined"), "{location}");
    let shown = text(&get(operator.console, location, Some(&operator.session)).await);
    assert!(shown.contains("Done: quarantined."), "{shown}");

    let receipt = operator.get("ev-1").await.unwrap();
    assert_eq!(receipt.state(), State::Quarantined);
    assert_eq!(
        receipt.last_error, reason,
        "the operator's reason, not the budget's"
    );
    assert_eq!(receipt.attempt, 1, "no attempt spent");
    assert_eq!(
        (receipt.lease_expires_at, receipt.next_attempt_at),
        (None, None)
    );
    assert_eq!(receipt.recovery_payload, b"body", "kept for a Redrive");
    let late = operator.complete("ev-1", token).await.unwrap_err();
    assert_eq!(late.code(), Code::Aborted, "the old holder's token is void");
    assert_eq!(
        operator.deliver("ev-1", 30).await.decision(),
        Decision::Quarantined
    );
}

async fn a_receipt_pruned_since_its_page_is_not_found_nothing_is_inserted_and_its_next_delivery_is_claimed(
    backend: Backend,
) {
    let app = app(backend).await;
    let operator = Operator::new(&app).await;
    operator.claimed("ev-1", 1).await;
    app.advance(Duration::from_secs(2));
    let form = operator.form("ev-1").await;
    // A redelivery finds the budget spent (claimd quarantines it); a day later it is pruned.
    assert_eq!(
        operator.deliver("ev-1", 1).await.decision(),
        Decision::Quarantined
    );
    app.advance(DAY + DAY);
    match app.janitor.run_once().await.expect("janitor pass") {
        Pass::Ran(report) => assert_eq!(report.deleted, 1),
        Pass::Skipped => panic!("the only janitor was refused its lock"),
    }

    let gone = operator.quarantine(&form, "poison").await;
    refused(&gone, 404, "no such receipt now");
    assert_eq!(app.receipt_rows().await, 0, "nothing inserted");
    let missing = operator.get("ev-1").await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let next = operator.deliver("ev-1", 1).await;
    assert_eq!(next.decision(), Decision::Claimed, "{next:?}");
    assert_eq!(next.receipt.as_ref().map(|r| r.attempt), Some(1));

    // The new life is an orphan too, in the state and attempt the old page showed.
    app.advance(Duration::from_secs(2));
    let before = operator.get("ev-1").await.unwrap();
    let other = operator.quarantine(&form, "poison").await;
    refused(&other, 409, "it changed since you saw it");
    assert!(text(&other).contains("claimed again"), "{}", text(&other));
    assert_eq!(
        operator.get("ev-1").await.unwrap(),
        before,
        "exactly as before"
    );
    let done = operator.complete("ev-1", next.claim_token).await.unwrap();
    assert_eq!(done.state(), State::Completed, "its holder still completes");
}

async fn a_live_lease_is_refused_and_its_holder_still_completes_with_its_token(backend: Backend) {
    let app = app(backend).await;
    let operator = Operator::new(&app).await;
    // Seen as an orphan; then its holder, late, heartbeats it back to a live lease.
    let late = operator.claimed("late", 1).await;
    app.advance(Duration::from_secs(2));
    let form = operator.form("late").await;
    let heartbeat = pb::HeartbeatRequest {
        namespace: NS.into(),
        key: "late".into(),
        claim_token: late.clone(),
        lease_ttl: secs(60, 0),
        checkpoint: None,
    };
    let mut client = app.new_client().await;
    client
        .heartbeat(operator.call(heartbeat))
        .await
        .expect("Heartbeat");
    let before = operator.get("late").await.unwrap();
    refused(
        &operator.quarantine(&form, "stuck").await,
        409,
        "changed since you saw it",
    );
    assert_eq!(
        operator.get("late").await.unwrap(),
        before,
        "exactly as before"
    );
    let done = operator.complete("late", late).await.unwrap();
    assert_eq!((done.state(), done.attempt), (State::Completed, 1));

    // A form of a receipt as it is, under a live lease: not an orphan.
    let busy = operator.claimed("busy", 3600).await;
    let before = operator.get("busy").await.unwrap();
    let answer = operator
        .quarantine(&operator.form_of(&before), "stuck")
        .await;
    refused(&answer, 409, "it is not an orphan now: its lease is live");
    assert_eq!(
        operator.get("busy").await.unwrap(),
        before,
        "exactly as before"
    );
    let done = operator.complete("busy", busy).await.unwrap();
    assert_eq!((done.state(), done.attempt), (State::Completed, 1));
}

async fn a_due_retry_is_not_quarantined_when_the_forms_attempt_is_stale(backend: Backend) {
    let app = app(backend).await;
    let operator = Operator::new(&app).await;
    let token = operator.claimed("ev-1", 30).await;
    operator.retry("ev-1", token, 1).await;
    app.advance(Duration::from_secs(2));
    let stale = operator.form("ev-1").await;
    assert!(stale.contains(&("attempt".into(), "1".into())), "{stale:?}");
    // Taken over (attempt 2) and due again before the operator posts.
    let token = operator.claimed("ev-1", 30).await;
    operator.retry("ev-1", token, 1).await;
    app.advance(Duration::from_secs(2));
    let before = operator.get("ev-1").await.unwrap();
    let answer = operator.quarantine(&stale, "poison").await;
    refused(
        &answer,
        409,
        "it changed since you saw it: it is RETRY_WAIT now, attempt 2",
    );
    assert_eq!(
        operator.get("ev-1").await.unwrap(),
        before,
        "exactly as before"
    );

    // The page as it is now quarantines it.
    let fresh = operator.form("ev-1").await;
    assert_eq!(operator.quarantine(&fresh, "poison").await.status, 303);
    let receipt = operator.get("ev-1").await.unwrap();
    assert_eq!((receipt.state(), receipt.attempt), (State::Quarantined, 2));
    assert_eq!(receipt.last_error, "poison");
}

async fn a_completed_or_quarantined_receipt_is_refused_and_nothing_changes(backend: Backend) {
    let app = app(backend).await;
    let operator = Operator::new(&app).await;
    let token = operator.claimed("done", 30).await;
    let done = operator.complete("done", token).await.unwrap();
    let answer = operator
        .quarantine(&operator.form_of(&done), "poison")
        .await;
    refused(&answer, 409, "it is not an orphan: it is COMPLETED");
    assert_eq!(operator.get("done").await.unwrap(), done);

    operator.claimed("dead", 1).await;
    app.advance(Duration::from_secs(2));
    let form = operator.form("dead").await;
    assert_eq!(operator.quarantine(&form, "first").await.status, 303);
    let dead = operator.get("dead").await.unwrap();
    let answer = operator
        .quarantine(&operator.form_of(&dead), "second")
        .await;
    refused(&answer, 409, "it is not an orphan: it is QUARANTINED");
    // The first form again: it changed since (it is the dead letter now).
    refused(
        &operator.quarantine(&form, "second").await,
        409,
        "changed since you saw it",
    );
    let after = operator.get("dead").await.unwrap();
    assert_eq!((after.last_error.as_str(), &after), ("first", &dead));
}
