//! The console's routes. Before any body is read, a request is either for a public route
//! (the sign-in page, the embedded assets) or carries a live session whose API key still
//! authenticates; a POST must also come from the console's own origin (`Origin` and
//! `Sec-Fetch-Site`, when the browser sends them) and then carry the session's CSRF token
//! in its form. Forms are at most [`MAX_FORM_BYTES`], read within [`super::READ_TIMEOUT`].

use super::session::{self, Session};
use super::{Console, READ_TIMEOUT, actions, reads, views};
use crate::auth::{AuthError, Refusal};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use std::collections::HashMap;
use std::net::SocketAddr;

/// The largest form body the console reads.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// The sign-in page's words when every session slot is held by other tenants.
const SESSIONS_FULL: &str = "The console holds as many sessions as it may, all of other \
    tenants, and a sign-in never ends those: try again in a few minutes.";

/// A form's or a query's fields.
pub type Fields = HashMap<String, String>;

/// Every answer of the console.
pub type Answer = Response<Full<Bytes>>;

/// One request → its answer; never an error (a failure is a page saying what failed).
pub async fn handle<B>(console: &Console, peer: SocketAddr, request: Request<B>) -> Answer
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut answer = route(console, peer, request).await;
    secure_headers(answer.headers_mut());
    answer
}

async fn route<B>(console: &Console, peer: SocketAddr, request: Request<B>) -> Answer
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let cookie_id = session::from_cookies(request.headers());
    match (&method, path.as_str()) {
        (&Method::GET, "/assets/console.css") => return views::asset("text/css", views::CSS),
        (&Method::GET, "/assets/console.js") => return views::asset("text/javascript", views::JS),
        (&Method::GET, "/login") => return views::sign_in(None, StatusCode::OK),
        (&Method::POST, "/login") => return sign_in(console, peer, request).await,
        _ => {}
    }
    let Some(session) = signed_in(console, peer, request.headers()).await else {
        return match method {
            Method::GET | Method::HEAD => redirect("/login"),
            _ => views::message(StatusCode::FORBIDDEN, "Sign in first.", None),
        };
    };
    let session = match session {
        Ok(session) => session,
        Err(answer) => return answer,
    };
    let query: Fields =
        serde_urlencoded::from_str(request.uri().query().unwrap_or("")).unwrap_or_default();
    if method == Method::GET || method == Method::HEAD {
        return match path.as_str() {
            "/" => reads::overview(console, &session).await,
            "/receipts" => reads::receipts(console, &session, &query).await,
            "/receipt" => reads::receipt(console, &session, &query).await,
            "/dead-letters/redrive" => reads::confirm_bulk(console, &session, &query).await,
            _ => views::message(StatusCode::NOT_FOUND, "No such page.", Some(&session)),
        };
    }
    if method != Method::POST {
        return views::message(StatusCode::METHOD_NOT_ALLOWED, "Use GET or POST.", None);
    }
    if !same_origin(request.headers(), console.tls) {
        return views::message(StatusCode::FORBIDDEN, "Cross-site request refused.", None);
    }
    let form = match read_form(request).await {
        Ok(form) => form,
        Err(answer) => return answer,
    };
    let token = form.get("csrf").map(String::as_str).unwrap_or("");
    if !session.csrf_matches(token) {
        return views::message(
            StatusCode::FORBIDDEN,
            "Missing or wrong CSRF token: reload the page and try again.",
            Some(&session),
        );
    }
    match path.as_str() {
        "/logout" => {
            if let Some(id) = &cookie_id {
                console.sessions.end(id);
            }
            sign_out(console, &session)
        }
        "/receipt/redrive" => actions::redrive(console, &session, &form).await,
        "/receipt/quarantine" => actions::quarantine(console, &session, &form).await,
        "/dead-letters/redrive" => actions::bulk_redrive(console, &session, &form).await,
        _ => views::message(StatusCode::NOT_FOUND, "No such action.", Some(&session)),
    }
}

/// The session of the request's cookie, if any: `Err` with the answer when it ended or
/// its key no longer authenticates.
async fn signed_in(
    console: &Console,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Option<Result<Session, Answer>> {
    let id = session::from_cookies(headers)?;
    let Some(session) = console.sessions.find(&id) else {
        return Some(Err(ended(console, "Your session ended: sign in again.")));
    };
    let bearer = format!("Bearer {}", session.key);
    match console
        .auth
        .authenticate(Some(bearer.as_bytes()), Some(peer.ip()))
        .await
    {
        Ok(principal) if principal == session.principal => Some(Ok(session)),
        Ok(_) | Err(AuthError::Refused(_)) => {
            console.sessions.end(&id);
            Some(Err(ended(
                console,
                "Your key no longer signs in: sign in again.",
            )))
        }
        Err(AuthError::Store(_)) => Some(Err(views::message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The database is unavailable; try again shortly.",
            None,
        ))),
    }
}

fn ended(console: &Console, why: &str) -> Answer {
    let mut answer = views::sign_in(Some(why), StatusCode::UNAUTHORIZED);
    set_cookie(&mut answer, &session::expired_cookie(console.tls));
    answer
}

/// `POST /login`: the form's `key` → a session, or the sign-in page saying why not.
async fn sign_in<B>(console: &Console, peer: SocketAddr, request: Request<B>) -> Answer
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if !same_origin(request.headers(), console.tls) {
        return views::message(StatusCode::FORBIDDEN, "Cross-site request refused.", None);
    }
    // A session of the same key this browser already holds is replaced, not added to.
    let presented = session::from_cookies(request.headers());
    let form = match read_form(request).await {
        Ok(form) => form,
        Err(answer) => return answer,
    };
    let key = form.get("key").map(|k| k.trim()).unwrap_or("");
    let bearer = format!("Bearer {key}");
    match console
        .auth
        .authenticate(Some(bearer.as_bytes()), Some(peer.ip()))
        .await
    {
        Ok(principal) => {
            let key_id = crate::auth::parse_key(key)
                .map_or("", |(id, _)| id)
                .to_owned();
            let started = console.sessions.start(
                principal,
                key_id.clone(),
                key.to_owned(),
                presented.as_deref(),
            );
            let Ok(id) = started else {
                tracing::warn!(console.key_id = %key_id, "console: sign-in refused: sessions full");
                return views::sign_in(Some(SESSIONS_FULL), StatusCode::SERVICE_UNAVAILABLE);
            };
            tracing::info!(console.key_id = %key_id, "console: signed in");
            let mut answer = redirect("/");
            set_cookie(&mut answer, &session::cookie(&id, console.tls));
            answer
        }
        Err(AuthError::Refused(Refusal::TooManyFailures)) => views::sign_in(
            Some("Too many failed sign-ins from your address; wait and try again."),
            StatusCode::TOO_MANY_REQUESTS,
        ),
        Err(AuthError::Refused(_)) => {
            views::sign_in(Some("That API key was refused."), StatusCode::UNAUTHORIZED)
        }
        Err(AuthError::Store(_)) => views::sign_in(
            Some("The database is unavailable; try again shortly."),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    }
}

fn sign_out(console: &Console, session: &Session) -> Answer {
    tracing::info!(console.key_id = %session.key_id, "console: signed out");
    let mut answer = redirect("/login");
    set_cookie(&mut answer, &session::expired_cookie(console.tls));
    answer
}

/// Whether a POST comes from a page of the console itself: `Sec-Fetch-Site` (when sent)
/// is `same-origin` or `none`, and `Origin` (when sent) is this host's.
fn same_origin(headers: &HeaderMap, tls: bool) -> bool {
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s != "same-origin" && s != "none") {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let scheme = if tls { "https" } else { "http" };
    host.is_some_and(|host| origin.to_str().ok() == Some(&format!("{scheme}://{host}")))
}

/// The form of a POST: at most [`MAX_FORM_BYTES`], within the read timeout.
async fn read_form<B>(request: Request<B>) -> Result<Fields, Answer>
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = Limited::new(request.into_body(), MAX_FORM_BYTES);
    let body = match tokio::time::timeout(READ_TIMEOUT, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) => {
            let why = "The form is too large or was cut off.";
            return Err(views::message(StatusCode::PAYLOAD_TOO_LARGE, why, None));
        }
        Err(_) => {
            let why = "The form did not arrive in time.";
            return Err(views::message(StatusCode::REQUEST_TIMEOUT, why, None));
        }
    };
    serde_urlencoded::from_bytes(&body)
        .map_err(|_| views::message(StatusCode::BAD_REQUEST, "The form could not be read.", None))
}

/// `303 See Other` to `to`.
pub fn redirect(to: &str) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::new()));
    *answer.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(to) {
        answer.headers_mut().insert(header::LOCATION, location);
    }
    answer
}

fn set_cookie(answer: &mut Answer, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        answer.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// What every answer says about itself: scripts and styles from the console only, never
/// framed, never cached, no referrer to other sites (`same-origin`: under `no-referrer`
/// a browser sends `Origin: null` on the console's own forms, which `same_origin` refuses).
fn secure_headers(headers: &mut HeaderMap) {
    let csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
               connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
    for (name, value) in [
        ("content-security-policy", csp),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}
