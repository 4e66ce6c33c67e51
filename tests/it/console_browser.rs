//! The operator console (issue 31) in a real headless Chromium, through WebDriver, on both
//! stores: an operator signs in with an API key, finds a dead letter in the overview and the
//! filtered list and redrives it; a tenant's key shows nothing of another tenant's; keys and
//! errors holding markup are text; cross-site posts and a form without its CSRF token are
//! refused; an orphan is quarantined with the operator's reason; bulk Redrive redrives the
//! number it stated; every page and form works with scripts off; and screenshots of the
//! pages are written under `target/console-screenshots/` for a person to look at.
//!
//! Receipts are made and checked through gRPC with the tenant's key (once a key exists,
//! calls without one are refused). Chromium and chromedriver are Debian's `chromium` and
//! `chromium-driver`: without them every test here fails, saying so.

mod site;
mod tenant;
mod webdriver;

use crate::common::app::{Backend, StoreKind, TestApp, decision};
use claimd::pb::{Decision, State};
use serde_json::json;
use site::Site;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;
use tenant::Tenant;
use webdriver::{Browser, Scripts};

/// A claimd with its console on 127.0.0.1, port 0.
async fn console_app(backend: Backend) -> TestApp {
    TestApp::builder()
        .backend(backend)
        .configure(|c| c.console_listen = Some(([127, 0, 0, 1], 0).into()))
        .spawn()
        .await
}

/// A browser on a claimd's console.
struct Console {
    browser: Browser,
    /// `http://127.0.0.1:PORT`.
    base: String,
}

impl std::ops::Deref for Console {
    type Target = Browser;

    fn deref(&self) -> &Browser {
        &self.browser
    }
}

impl Console {
    /// A fresh browser (scripts on or off) for `app`'s console, not signed in.
    async fn open(app: &TestApp, scripts: Scripts) -> Console {
        let addr = app.console_addr.expect("the console listens");
        Console {
            browser: Browser::start(scripts).await,
            base: format!("http://{addr}"),
        }
    }

    /// The console's URL of `path` (with its query).
    fn page_url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Signs in with `key` through the sign-in form, and lands on the overview.
    async fn sign_in(&self, key: &str) {
        self.goto(&self.page_url("/login")).await;
        self.type_into("#key", key).await;
        self.click("#sign-in").await;
        // The overview, or a page saying why not.
        self.wait_for("#overview, #empty, #message").await;
        if self.try_find("#message").await.is_some() {
            let (url, status) = (self.url().await, self.status().await);
            panic!(
                "signing in was refused: HTTP {status} at {url}: {}",
                self.text("#message").await
            );
        }
        assert_eq!(
            self.url().await,
            self.page_url("/"),
            "signed in, not on the overview"
        );
    }

    /// Opens the page of `ns`/`key` by its URL.
    async fn receipt(&self, ns: &str, key: &str) {
        let query = serde_urlencoded::to_string([("namespace", ns), ("key", key)]);
        self.goto(&self.page_url(&format!("/receipt?{}", query.expect("a query"))))
            .await;
        self.wait_for("dl#receipt").await;
    }

    /// The overview's `cell` (a selector within the row) of namespace `ns`.
    async fn cell(&self, ns: &str, cell: &str) -> String {
        self.text(&format!("tr[data-namespace=\"{ns}\"] {cell}"))
            .await
    }

    /// The keys the list shows, in order.
    async fn listed(&self) -> Vec<String> {
        self.texts("tr.receipt a.key").await
    }

    /// The state a receipt's page shows (without the orphan badge).
    async fn state_shown(&self) -> String {
        let state = self.text("#state").await;
        state.split_whitespace().next().unwrap_or("").to_owned()
    }

    /// Waits for the answer to a form posted to `path`: its HTTP status and `#message`.
    async fn answer_to(&self, path: &str) -> (u64, String) {
        let target = self.page_url(path);
        self.wait_for_url(&target, |url| url == target).await;
        self.wait_for("#message").await;
        (self.status().await, self.text("#message").await)
    }

    async fn quit(self) {
        self.browser.quit().await;
    }
}

async fn an_operator_finds_a_dead_letter_by_namespace_and_redrives_it_back_to_work(
    backend: Backend,
) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    acme.dead_letter("hooks", "evt-1", "HTTP 500 from the handler")
        .await;
    acme.claimed("billing", "inv-1", 30).await;
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;

    assert_eq!(console.text("#tenant").await, "acme");
    assert_eq!(
        console.cell("hooks", "td.dead").await,
        "1",
        "hooks' dead letters"
    );
    assert_eq!(console.cell("billing", "td.dead").await, "0");
    assert_eq!(
        console.cell("billing", "td:nth-of-type(1)").await,
        "1",
        "billing processing"
    );
    // The overview's count of dead letters links to their list.
    console
        .click("tr[data-namespace=\"hooks\"] td.dead a")
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.listed().await, ["evt-1"]);
    assert_eq!(console.texts("tr.receipt td.state").await, ["quarantined"]);
    assert_eq!(
        console.texts("tr.receipt td.error").await,
        ["HTTP 500 from the handler"]
    );

    // Every namespace, then the filter form narrows the list to one.
    console.goto(&console.page_url("/receipts")).await;
    console.wait_for("table#receipts").await;
    let mut every = console.listed().await;
    every.sort();
    assert_eq!(every, ["evt-1", "inv-1"]);
    console
        .type_into("form.filters input[name=namespace]", "hooks")
        .await;
    console.click("#filter").await;
    console
        .wait_for_url("the list of hooks", |url| url.contains("namespace=hooks"))
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(
        console.listed().await,
        ["evt-1"],
        "billing's receipt is not listed"
    );

    // Its page; Redrive; the page shows it waiting to be claimed again.
    console.click("tr.receipt a.key").await;
    console.wait_for("dl#receipt").await;
    assert_eq!(console.text("#key").await, "evt-1");
    assert_eq!(console.state_shown().await, "quarantined");
    console.click("#redrive").await;
    console.wait_for("#message").await;
    assert_eq!(console.text("#message").await, "Done: redriven.");
    assert_eq!(console.state_shown().await, "retry_wait");
    assert_eq!(
        console.count("#redrive").await,
        0,
        "no Redrive for a waiting receipt"
    );

    let again = acme.claim("hooks", "evt-1", 30).await;
    assert_eq!(decision(&again), Decision::Claimed, "{again:?}");
    console.quit().await;
}

async fn a_tenants_key_shows_none_of_another_tenants_receipts(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    let globex = Tenant::new(&app, "globex").await;
    acme.dead_letter("hooks", "acme-evt", "acme's error").await;
    globex
        .dead_letter("hooks", "globex-evt", "globex's error")
        .await;
    globex.claimed("globex-only", "g-1", 30).await;
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;

    assert_eq!(console.text("#tenant").await, "acme");
    let namespaces = console.texts("table#overview tbody th").await;
    assert_eq!(namespaces, ["hooks"], "only acme's namespaces");
    assert_eq!(
        console.cell("hooks", "td.dead").await,
        "1",
        "acme's dead letter only"
    );

    console.goto(&console.page_url("/receipts")).await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.listed().await, ["acme-evt"]);
    console
        .goto(&console.page_url("/receipts?namespace=globex-only"))
        .await;
    console.wait_for("#empty").await;
    assert_eq!(console.count("tr.receipt").await, 0);

    // globex's receipt by its URL: there is no such receipt for acme.
    let query = "/receipt?namespace=hooks&key=globex-evt";
    console.goto(&console.page_url(query)).await;
    console.wait_for("#message").await;
    assert_eq!(console.status().await, 404);
    assert_eq!(console.text("#message").await, "No such receipt.");
    assert_eq!(console.count("dl#receipt").await, 0);
    assert!(
        !console.main_text().await.contains("globex's error"),
        "globex's error shown to acme"
    );

    // acme's own Redrive form, pointed at globex's key: nothing happens to globex's.
    let before = globex.get("hooks", "globex-evt").await;
    console.receipt("hooks", "acme-evt").await;
    let retarget = "document.querySelector('form[action=\"/receipt/redrive\"] \
                    input[name=key]').value = arguments[0];";
    console.script(retarget, json!(["globex-evt"])).await;
    console.click("#redrive").await;
    let (status, message) = console.answer_to("/receipt/redrive").await;
    assert_eq!(status, 404, "{message}");
    assert_eq!(globex.get("hooks", "globex-evt").await, before);
    assert_eq!(acme.state("hooks", "acme-evt").await, State::Quarantined);
    console.quit().await;
}

/// A key and an error that would run script if a page took them for markup: each sets
/// `window.__pwned` and the title.
const MARKUP_KEY: &str = "<script>window.__pwned='key';document.title='pwned'</script>";
const MARKUP_ERROR: &str = "<img src=x onerror=\"window.__pwned='error';document.title='pwned'\">\
    </pre><script>window.__pwned='pre'</script> & &amp; \"quoted\" 'single'";

/// Nothing of [`MARKUP_KEY`] or [`MARKUP_ERROR`] became an element or ran (the console's
/// Content-Security-Policy would stop inline script anyway: the elements are what would
/// show that escaping broke).
async fn no_markup_got_in(console: &Console) {
    let pwned = console.script("return window.__pwned === undefined;", json!([]));
    assert_eq!(pwned.await, json!(true), "a payload's script ran");
    let title = console.title().await;
    assert!(title.ends_with(" · claimd console"), "title {title:?}");
    assert_eq!(console.count("img").await, 0, "an <img> from a payload");
    assert_eq!(
        console.count("script").await,
        1,
        "only the console's own script"
    );
}

async fn keys_and_errors_holding_markup_are_shown_as_text(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    acme.dead_letter("hooks", MARKUP_KEY, MARKUP_ERROR).await;
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;

    console
        .click("tr[data-namespace=\"hooks\"] td.dead a")
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.listed().await, [MARKUP_KEY]);
    assert_eq!(console.count("a.key *").await, 0, "the key made elements");
    assert_eq!(console.texts("td.error").await, [MARKUP_ERROR]);
    assert_eq!(
        console.count("td.error *").await,
        0,
        "the error made elements"
    );
    no_markup_got_in(&console).await;

    // Its page, through the list's link (the key in a URL).
    console.click("tr.receipt a.key").await;
    console.wait_for("dl#receipt").await;
    assert_eq!(console.text("#key").await, MARKUP_KEY);
    assert_eq!(console.count("#key *").await, 0);
    assert_eq!(console.text("#last-error").await, MARKUP_ERROR);
    assert_eq!(console.count("#last-error *").await, 0);
    let hidden = "return document.querySelector('form[action=\"/receipt/redrive\"] \
                  input[name=key]').value;";
    assert_eq!(console.script(hidden, json!([])).await, json!(MARKUP_KEY));
    no_markup_got_in(&console).await;

    // The key goes back through the form intact: Redrive reaches this receipt.
    console.click("#redrive").await;
    console.wait_for("#message").await;
    assert_eq!(console.text("#message").await, "Done: redriven.");
    assert_eq!(console.text("#key").await, MARKUP_KEY);
    no_markup_got_in(&console).await;
    assert_eq!(acme.state("hooks", MARKUP_KEY).await, State::RetryWait);
    console.quit().await;
}

/// A page that posts a Redrive of hooks/evt-1 to the console at `target` as soon as it
/// loads, without a CSRF token.
fn forged_redrive(target: &str) -> String {
    format!(
        "<!doctype html><title>You won a prize</title>\
         <form id=\"f\" method=\"post\" action=\"{target}\">\
         <input type=\"hidden\" name=\"namespace\" value=\"hooks\">\
         <input type=\"hidden\" name=\"key\" value=\"evt-1\">\
         </form><script>document.getElementById('f').submit();</script>"
    )
}

async fn a_cross_site_post_and_a_form_without_its_csrf_token_are_refused(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    acme.dead_letter("hooks", "evt-1", "poison").await;
    let before = acme.get("hooks", "evt-1").await;
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;
    let target = console.page_url("/receipt/redrive");

    // Cross-site: 127.0.0.2 is another host than the console's 127.0.0.1, and an IP
    // address's site is the address itself. The SameSite=Strict session cookie stays home
    // and the browser says `Sec-Fetch-Site: cross-site`: either refusal will do.
    let other_site = Site::serve(
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        forged_redrive(&target),
    )
    .await;
    console.goto(&other_site.url()).await;
    let (status, message) = console.answer_to("/receipt/redrive").await;
    assert_eq!(status, 403, "{message}");
    assert!(
        ["Sign in first.", "Cross-site request refused."].contains(&message.as_str()),
        "{message}"
    );
    assert_eq!(
        acme.get("hooks", "evt-1").await,
        before,
        "a cross-site post changed it"
    );

    // Same site, another origin: 127.0.0.1 on another port (a port is no part of a site),
    // so the session cookie goes along; `Origin` and `Sec-Fetch-Site: same-site` tell.
    let other_origin = Site::serve(IpAddr::V4(Ipv4Addr::LOCALHOST), forged_redrive(&target)).await;
    console.goto(&other_origin.url()).await;
    let answer = console.answer_to("/receipt/redrive").await;
    assert_eq!(answer, (403, "Cross-site request refused.".to_owned()));
    assert_eq!(
        acme.get("hooks", "evt-1").await,
        before,
        "a cross-origin post changed it"
    );

    // The console's own form, its token removed by script.
    console.receipt("hooks", "evt-1").await;
    let strip = "document.querySelector('form[action=\"/receipt/redrive\"] \
                 input[name=csrf]').remove();";
    console.script(strip, json!([])).await;
    assert_eq!(
        console.count("input[name=csrf]").await,
        1,
        "only sign-out's token is left"
    );
    console.click("#redrive").await;
    let answer = console.answer_to("/receipt/redrive").await;
    let wrong = "Missing or wrong CSRF token: reload the page and try again.";
    assert_eq!(answer, (403, wrong.to_owned()));
    assert_eq!(
        acme.get("hooks", "evt-1").await,
        before,
        "a post without its token changed it"
    );

    // With its token the same form works: the refusals were for the token and the site.
    console.receipt("hooks", "evt-1").await;
    console.click("#redrive").await;
    console.wait_for("#message").await;
    assert_eq!(console.text("#message").await, "Done: redriven.");
    assert_eq!(acme.state("hooks", "evt-1").await, State::RetryWait);
    console.quit().await;
}

async fn an_orphan_is_quarantined_from_its_page_with_the_operators_reason(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    acme.claimed("hooks", "stuck", 1).await;
    acme.claimed("hooks", "busy", 3600).await;
    // stuck's lease runs out; busy's does not.
    app.advance(Duration::from_secs(5));
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;

    assert_eq!(console.cell("hooks", "td.orphans").await, "1");
    console
        .click("tr[data-namespace=\"hooks\"] td.orphans a")
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.listed().await, ["stuck"]);
    console.click("tr.receipt a.key").await;
    console.wait_for("dl#receipt").await;
    assert_eq!(console.state_shown().await, "processing");
    assert_eq!(console.text("#orphan").await, "orphan");

    let reason = "handler hung on a locked row; quarantined by the on-call";
    console.type_into("#reason", reason).await;
    console.click("#quarantine").await;
    console.wait_for("#message").await;
    assert_eq!(console.text("#message").await, "Done: quarantined.");
    assert_eq!(console.state_shown().await, "quarantined");
    assert_eq!(console.text("#last-error").await, reason);
    assert_eq!(console.count("#quarantine").await, 0);

    let stuck = acme.get("hooks", "stuck").await;
    assert_eq!(
        State::try_from(stuck.state),
        Ok(State::Quarantined),
        "{stuck:?}"
    );
    assert_eq!(stuck.last_error, reason);

    // A receipt whose lease is live offers nothing to do.
    console.receipt("hooks", "busy").await;
    assert_eq!(console.state_shown().await, "processing");
    for absent in ["#orphan", "#quarantine", "#redrive"] {
        assert_eq!(
            console.count(absent).await,
            0,
            "{absent} on a live lease's page"
        );
    }
    assert_eq!(acme.state("hooks", "busy").await, State::Processing);
    console.quit().await;
}

async fn bulk_redrive_states_the_count_and_redrives_that_many(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    for key in ["d-1", "d-2", "d-3"] {
        acme.dead_letter("bulk", key, "poison").await;
    }
    acme.completed("bulk", "done-1").await;
    acme.dead_letter("other", "o-1", "poison").await;
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;

    assert_eq!(console.cell("bulk", "td.dead").await, "3");
    console.click("tr[data-namespace=\"bulk\"] a.button").await;
    console.wait_for("#count").await;
    assert_eq!(console.text("#count").await, "3");
    assert_eq!(console.text("#redrive-all").await, "Redrive 3");
    console.click("#redrive-all").await;
    console.wait_for("#redriven").await;
    assert_eq!(console.text("#redriven").await, "3");

    let mut bulk = acme.list("bulk").await;
    bulk.sort();
    let waiting = [
        ("d-1".to_owned(), State::RetryWait),
        ("d-2".to_owned(), State::RetryWait),
        ("d-3".to_owned(), State::RetryWait),
        ("done-1".to_owned(), State::Completed),
    ];
    assert_eq!(bulk, waiting, "no dead letter left in bulk");
    let other = acme.list("other").await;
    assert_eq!(
        other,
        [("o-1".to_owned(), State::Quarantined)],
        "another namespace's"
    );

    console.goto(&console.page_url("/")).await;
    console.wait_for("#overview").await;
    assert_eq!(console.cell("bulk", "td.dead").await, "0");
    assert_eq!(
        console.count("tr[data-namespace=\"bulk\"] a.button").await,
        0
    );
    assert_eq!(console.cell("other", "td.dead").await, "1");
    console.quit().await;
}

async fn reading_filtering_and_redrive_work_with_javascript_off(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    acme.dead_letter("hooks", "evt-1", "HTTP 410 Gone").await;
    acme.completed("hooks", "evt-0").await;
    let console = Console::open(&app, Scripts::Off).await;

    // Scripts are off: a page whose script would retitle it keeps its title.
    console
        .goto("data:text/html,<title>off</title><script>document.title='on'</script>")
        .await;
    assert_eq!(console.title().await, "off", "scripts still run");

    console.sign_in(&acme.key).await;
    assert_eq!(console.cell("hooks", "td.dead").await, "1");
    assert_eq!(
        console.cell("hooks", "td:nth-of-type(3)").await,
        "1",
        "completed"
    );
    console
        .click("tr[data-namespace=\"hooks\"] td.dead a")
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.listed().await, ["evt-1"]);

    // The filter form: another state picked from its list.
    console
        .click("form.filters select[name=state] option[value=completed]")
        .await;
    console.click("#filter").await;
    console
        .wait_for_url("the completed receipts", |url| {
            url.contains("state=completed")
        })
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.listed().await, ["evt-0"]);

    console
        .goto(&console.page_url("/receipts?namespace=hooks&state=quarantined"))
        .await;
    console.click("tr.receipt a.key").await;
    console.wait_for("dl#receipt").await;
    assert_eq!(console.text("#last-error").await, "HTTP 410 Gone");
    console.click("#redrive").await;
    console.wait_for("#message").await;
    assert_eq!(console.text("#message").await, "Done: redriven.");
    assert_eq!(console.state_shown().await, "retry_wait");
    assert_eq!(acme.state("hooks", "evt-1").await, State::RetryWait);
    console.quit().await;
}

/// Where screenshots go: `target/console-screenshots/` (under `CARGO_TARGET_DIR` if set).
fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("console-screenshots")
}

/// Saves the page as `name` in [`screenshot_dir`]; checks it is a PNG of the viewport.
async fn save_screenshot(console: &Console, name: &str) -> PathBuf {
    let png = console.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
    let (width, height) = (&png[16..20], &png[20..24]);
    let size = |b: &[u8]| u32::from_be_bytes(b.try_into().expect("four bytes"));
    // The viewport: the 1280×900 window less what headless Chromium keeps for its frame.
    let (width, height) = (size(width), size(height));
    assert!(
        width == 1280 && (600..=900).contains(&height),
        "{name}: {width}×{height}"
    );
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir.join(name);
    std::fs::write(&path, &png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("screenshot: {}", path.display());
    path
}

async fn screenshots_of_the_overview_and_a_receipt_are_written(backend: Backend) {
    let app = console_app(backend).await;
    let acme = Tenant::new(&app, "acme").await;
    // An orphan first: its lease runs out when the clock moves on.
    acme.claimed("stripe-webhooks", "evt_1PqA0x2eZvKYlo2C", 1)
        .await;
    app.advance(Duration::from_secs(10));
    for key in ["evt_1PqA1b2eZvKYlo2C", "evt_1PqA1c2eZvKYlo2C"] {
        acme.claimed("stripe-webhooks", key, 300).await;
    }
    for key in [
        "evt_1Pq9ZZ2eZvKYlo2C",
        "evt_1Pq9ZY2eZvKYlo2C",
        "evt_1Pq9ZX2eZvKYlo2C",
    ] {
        acme.completed("stripe-webhooks", key).await;
    }
    acme.retrying(
        "stripe-webhooks",
        "evt_1PqA2d2eZvKYlo2C",
        "ledger: HTTP 503 Service Unavailable",
        120,
    )
    .await;
    let dead = "evt_1PqA3e2eZvKYlo2C";
    let error = "signature mismatch: the body changed after it was signed\n\
                 at verify (handlers/stripe.py:41)";
    acme.dead_letter("stripe-webhooks", dead, error).await;
    for key in ["delivery-7f3a", "delivery-7f3b"] {
        acme.completed("github-events", key).await;
    }
    acme.dead_letter(
        "github-events",
        "delivery-7f3c",
        "KeyError: 'pull_request' in handlers/github.py:88",
    )
    .await;
    let console = Console::open(&app, Scripts::On).await;
    console.sign_in(&acme.key).await;
    let store = match backend.store {
        StoreKind::Postgres => "postgres",
        StoreKind::Sqlite => "sqlite",
    };

    assert_eq!(console.count("table#overview tbody tr").await, 2);
    save_screenshot(&console, &format!("{store}-overview.png")).await;
    console
        .goto(&console.page_url("/receipts?namespace=stripe-webhooks"))
        .await;
    console.wait_for("table#receipts").await;
    assert_eq!(console.count("tr.receipt").await, 8);
    save_screenshot(&console, &format!("{store}-receipts.png")).await;
    console.receipt("stripe-webhooks", dead).await;
    assert_eq!(console.text("#last-error").await, error);
    save_screenshot(&console, &format!("{store}-receipt.png")).await;
    console.quit().await;
}

conformance!(
    an_operator_finds_a_dead_letter_by_namespace_and_redrives_it_back_to_work,
    a_tenants_key_shows_none_of_another_tenants_receipts,
    keys_and_errors_holding_markup_are_shown_as_text,
    a_cross_site_post_and_a_form_without_its_csrf_token_are_refused,
    an_orphan_is_quarantined_from_its_page_with_the_operators_reason,
    bulk_redrive_states_the_count_and_redrives_that_many,
    reading_filtering_and_redrive_work_with_javascript_off,
    screenshots_of_the_overview_and_a_receipt_are_written,
);
