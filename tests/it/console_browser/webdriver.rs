//! A headless Chromium driven through W3C WebDriver: `chromedriver` started on a free
//! loopback port in a process group of its own (so that dropping the [`Browser`], also when
//! a test panics, kills it and every Chromium process it started), one session per test,
//! and the few WebDriver commands the console's tests use, sent as JSON over HTTP/1.1.
//!
//! A browser per test, not one shared: cookies are a host's, whatever the port, so tests
//! running side by side with their consoles on 127.0.0.1 would overwrite each other's
//! session cookie in one profile. Starting one takes under a second.
//!
//! Written here rather than taken from a WebDriver crate: these endpoints are all the tests
//! need, and they cost no dependency beyond the hyper, serde_json and base64 the workspace
//! already builds.

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a test is told when the browser is not installed: the suite never skips.
const INSTALL: &str = "the console's browser tests need Chromium and its WebDriver, the \
    Debian packages chromium and chromium-driver: apt-get install -y chromium chromium-driver \
    (scripts/test installs them)";

/// The key W3C WebDriver names an element reference by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long a page may take to show what a test waits for.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Whether pages may run scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scripts {
    /// Chromium's default.
    On,
    /// Turned off by the profile's content setting (WebDriver's own commands still work).
    Off,
}

/// A failed WebDriver command: the W3C error code (`no such element`, …) and message.
#[derive(Debug, Clone)]
pub struct CommandError {
    /// The error code, or `transport` when chromedriver could not be reached.
    pub error: String,
    /// What chromedriver said.
    pub message: String,
}

impl CommandError {
    fn transport(what: impl std::fmt::Display) -> CommandError {
        CommandError {
            error: "transport".into(),
            message: what.to_string(),
        }
    }
}

/// `name` on `PATH`, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A running chromedriver: its process group is killed when this is dropped.
struct Driver {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Driver {
    /// Starts `chromedriver` on a free port and waits until it is ready; tries a few ports
    /// (another process may take the free one first).
    async fn start(binary: &Path, dir: &Path) -> Driver {
        let mut last = String::new();
        for attempt in 0..3 {
            let port = crate::common::process::free_addr().port();
            let log = dir.join(format!("chromedriver-{attempt}.log"));
            // The temporary directory was just made: a log file in it can be created.
            let out = File::create(&log).expect("chromedriver log file");
            let err = out.try_clone().expect("chromedriver log file handle");
            let child = Command::new(binary)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("{} does not start ({e}): {INSTALL}", binary.display()));
            let mut driver = Driver { child, port, log };
            match driver.ready().await {
                Ok(()) => return driver,
                Err(why) => last = why,
            }
        }
        panic!("chromedriver never became ready: {last}");
    }

    /// Waits for `GET /status` to say ready; `Err` says why it did not.
    async fn ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("it exited ({status}): {}", self.log_text()));
            }
            if let Ok(status) = command(self.port, Method::GET, "/status", None).await
                && status["ready"] == json!(true)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("not ready after {PATIENCE:?}: {}", self.log_text()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The group is chromedriver's own (`process_group(0)`): it and the Chromium it
        // started, none of anything else (Chromium's crash handlers, in sessions of their
        // own, exit when it does). Gone already after a clean `quit`, which is fine.
        if let Ok(id) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(id), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// One WebDriver command to chromedriver on `port`: the answer's `value`, or its error.
async fn command(
    port: u16,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, CommandError> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(CommandError::transport)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(CommandError::transport)?;
    tokio::spawn(connection);
    let body = body.map_or_else(Vec::new, |b| b.to_string().into_bytes());
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, format!("127.0.0.1:{port}"))
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .map_err(CommandError::transport)?;
    let answer = tokio::time::timeout(Duration::from_secs(60), sender.send_request(request))
        .await
        .map_err(|_| CommandError::transport("no answer within 60 s"))?
        .map_err(CommandError::transport)?;
    let status = answer.status();
    let bytes = answer
        .into_body()
        .collect()
        .await
        .map_err(CommandError::transport)?
        .to_bytes();
    let mut json: Value = serde_json::from_slice(&bytes).map_err(|e| {
        CommandError::transport(format!("{e}: {}", String::from_utf8_lossy(&bytes)))
    })?;
    let value = json["value"].take();
    if status.is_success() {
        Ok(value)
    } else {
        Err(CommandError {
            error: value["error"]
                .as_str()
                .unwrap_or("unknown error")
                .to_owned(),
            message: value["message"].as_str().unwrap_or("").to_owned(),
        })
    }
}

/// An element of the current page, by WebDriver reference.
#[derive(Debug, Clone)]
pub struct Element {
    id: String,
    /// The selector it was found by, for messages.
    css: String,
}

/// A headless Chromium with one WebDriver session.
pub struct Browser {
    session: String,
    // Fields drop in order: chromedriver and Chromium are killed before their directory
    // is removed.
    driver: Driver,
    _dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium 1280×900 on a fresh profile; panics
    /// (saying which Debian packages to install) if either is missing.
    pub async fn start(scripts: Scripts) -> Browser {
        crate::common::panic_line::install();
        let driver_binary = on_path("chromedriver").unwrap_or_else(|| panic!("{INSTALL}"));
        let chromium = on_path("chromium").unwrap_or_else(|| panic!("{INSTALL}"));
        // A test cannot run without a profile directory.
        let dir = tempfile::tempdir().expect("temp dir for the browser");
        let profile = dir.path().join("profile");
        let driver = Driver::start(&driver_binary, dir.path()).await;
        let mut prefs = json!({});
        if scripts == Scripts::Off {
            prefs["profile.managed_default_content_settings.javascript"] = json!(2);
        }
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            "timeouts": { "implicit": 0, "pageLoad": 30_000, "script": 10_000 },
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Chromium's sandbox refuses to run as root.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--lang=en-US",
                ],
                "prefs": prefs,
            },
        } } });
        let started = command(driver.port, Method::POST, "/session", Some(capabilities)).await;
        let session = match started {
            Ok(value) => value["sessionId"]
                .as_str()
                .expect("a new session has an id")
                .to_owned(),
            Err(e) => panic!(
                "{} does not start under chromedriver ({}: {}); {INSTALL}\n{}",
                chromium.display(),
                e.error,
                e.message,
                driver.log_text()
            ),
        };
        Browser {
            session,
            driver,
            _dir: dir,
        }
    }

    /// Ends the session (Chromium exits) and chromedriver.
    pub async fn quit(self) {
        let path = format!("/session/{}", self.session);
        let _ = command(self.driver.port, Method::DELETE, &path, None).await;
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CommandError> {
        let path = format!("/session/{}{path}", self.session);
        command(self.driver.port, method, &path, body).await
    }

    /// A command that must succeed.
    async fn must(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        match self.send(method, path, body).await {
            Ok(value) => value,
            Err(e) => panic!(
                "WebDriver {path}: {}: {}\nat {}",
                e.error,
                e.message,
                self.url().await
            ),
        }
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        self.must(Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// The current page's URL.
    pub async fn url(&self) -> String {
        let value = self.send(Method::GET, "/url", None).await;
        value
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// The current page's title.
    pub async fn title(&self) -> String {
        let value = self.must(Method::GET, "/title", None).await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page; its result.
    /// WebDriver's scripts run whatever the page's Content-Security-Policy or the profile's
    /// script setting says.
    pub async fn script(&self, script: &str, args: Value) -> Value {
        let body = json!({ "script": script, "args": args });
        self.must(Method::POST, "/execute/sync", Some(body)).await
    }

    /// The HTTP status the current document was served with.
    pub async fn status(&self) -> u64 {
        let script = "const n = performance.getEntriesByType('navigation')[0]; \
                      return n ? n.responseStatus : null;";
        let status = self.script(script, json!([])).await;
        status
            .as_u64()
            .unwrap_or_else(|| panic!("no navigation status: {status}"))
    }

    /// The first element `css` matches, if any.
    pub async fn try_find(&self, css: &str) -> Option<Element> {
        let body = json!({ "using": "css selector", "value": css });
        match self.send(Method::POST, "/element", Some(body)).await {
            Ok(value) => Some(Element {
                id: value[ELEMENT]
                    .as_str()
                    .expect("an element reference")
                    .to_owned(),
                css: css.to_owned(),
            }),
            Err(e) if e.error == "no such element" => None,
            Err(e) => panic!("finding {css}: {}: {}", e.error, e.message),
        }
    }

    /// The first element `css` matches; panics, showing the page, when there is none.
    pub async fn find(&self, css: &str) -> Element {
        match self.try_find(css).await {
            Some(element) => element,
            None => panic!(
                "no {css} at {}:\n{}",
                self.url().await,
                self.main_text().await
            ),
        }
    }

    /// Waits up to [`PATIENCE`] for an element `css` matches.
    pub async fn wait_for(&self, css: &str) -> Element {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(element) = self.try_find(css).await {
                return element;
            }
            if Instant::now() > deadline {
                panic!(
                    "no {css} after {PATIENCE:?} at {}:\n{}",
                    self.url().await,
                    self.main_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits up to [`PATIENCE`] until the URL satisfies `wanted` (`what` names it); the URL.
    pub async fn wait_for_url(&self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let url = self.url().await;
            if wanted(&url) {
                return url;
            }
            if Instant::now() > deadline {
                panic!(
                    "the URL is still {url} after {PATIENCE:?}, not {what}:\n{}",
                    self.main_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `textContent` of the first element `css` matches (exactly as the DOM holds it,
    /// not as rendered); panics when there is none.
    pub async fn text(&self, css: &str) -> String {
        let script = "const e = document.querySelector(arguments[0]); \
                      return e ? e.textContent : null;";
        match self.script(script, json!([css])).await {
            Value::String(text) => text,
            _ => panic!(
                "no {css} at {}:\n{}",
                self.url().await,
                self.main_text().await
            ),
        }
    }

    /// The `textContent` of every element `css` matches, in document order.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let script = "return Array.from(document.querySelectorAll(arguments[0]), \
                      e => e.textContent);";
        let texts = self.script(script, json!([css])).await;
        serde_json::from_value(texts).expect("a list of strings")
    }

    /// How many elements `css` matches.
    pub async fn count(&self, css: &str) -> usize {
        let script = "return document.querySelectorAll(arguments[0]).length;";
        let count = self.script(script, json!([css])).await;
        usize::try_from(count.as_u64().expect("a count")).expect("a small count")
    }

    /// The text of the page's `<main>` (or body), for failure messages.
    pub async fn main_text(&self) -> String {
        let script = "const m = document.querySelector('main') || document.body; \
                      return m ? m.innerText : '';";
        match self
            .send(
                Method::POST,
                "/execute/sync",
                Some(json!({ "script": script, "args": [] })),
            )
            .await
        {
            Ok(Value::String(text)) => text,
            _ => String::new(),
        }
    }

    /// Clicks the first element `css` matches, finding it again if the page replaced it
    /// meanwhile (the overview refreshes its table by script).
    pub async fn click(&self, css: &str) {
        for _ in 0..5 {
            let element = self.find(css).await;
            let path = format!("/element/{}/click", element.id);
            match self.send(Method::POST, &path, Some(json!({}))).await {
                Ok(_) => return,
                Err(e) if e.error == "stale element reference" => continue,
                Err(e) => panic!("clicking {}: {}: {}", element.css, e.error, e.message),
            }
        }
        panic!("{css} went stale five times in a row");
    }

    /// Types `text` into the first element `css` matches.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        let path = format!("/element/{}/value", element.id);
        self.must(Method::POST, &path, Some(json!({ "text": text })))
            .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let value = self.must(Method::GET, "/screenshot", None).await;
        let encoded = value.as_str().expect("a screenshot is base64");
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("a screenshot decodes")
    }
}
