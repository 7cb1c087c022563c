//! The web dashboard: served by the daemon's proxy at `binky.localhost` (on the proxy's HTTP
//! port, and its HTTPS port when HTTPS is on), so it costs no port of its own.
//!
//! The page (`assets/`, hand-written HTML, CSS and JavaScript embedded in the binary) reads
//! a JSON API: `/api/stream` pushes every world's view as server-sent events whenever the
//! store changes (only the worlds that changed), `/api/logs` streams a world's or one
//! service's log files, `/api/events` a world's timeline. Its buttons post to `/api/up`,
//! `down`, `reload`, `apply`, `remove` and `approve`, which write desired state through the
//! same functions as the CLI commands ([`crate::requests`], [`crate::apply`]) and nudge the
//! controllers; the page never acts on reality itself.
//!
//! # Guarantees
//! - Loopback only: it is served on the proxy's listeners, which bind 127.0.0.1 and ::1.
//! - Every request must name the dashboard exactly as its `Host`: `binky.localhost` and the
//!   port of the listener it came in on (none written: the scheme's own, 80 or 443). A
//!   DNS-rebinding page names its own host; a request for another port was meant for
//!   another server.
//! - Everything under `/api/` needs a live session (`session.rs`), held by the browser as
//!   the `HttpOnly`, `SameSite=Strict` cookie `binky_session`. It is made when the browser
//!   opens the one-time link `binky dashboard` prints (the token comes from the daemon over
//!   its control socket, mode 0600: only the home's user can ask; it works once and for ten
//!   minutes), kept by the daemon in memory only, and ends after 12 h without use, 24 h
//!   after the sign-in, at sign-out (`POST /api/signout`) or at the browser's next sign-in.
//! - Every action (`POST`) must also carry the `Origin` of the dashboard on that listener —
//!   its scheme, `binky.localhost` and its port — so another page open in the same browser
//!   (CSRF), or the dashboard's page on the other listener, cannot post to it.
//! - Log lines pass through the scrubber the log files are written with, again: a file
//!   written without it (the hooks' output, a daemon started without `__scrub`) shows no
//!   credential either.

mod logs;
pub mod session;
mod snapshot;

use std::sync::Arc;
use std::time::Instant;

use binky_controllers::runtime::Trigger;
use binky_controllers::store::{self, Store, World, WorldId};
use binky_controllers::url::{host_port, Url};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, COOKIE, ORIGIN, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::paths::Home;
use crate::proxy::body::{full, Body};
use crate::proxy::Listener;

/// The dashboard's host name.
pub const HOST: &str = "binky.localhost";

/// The cookie that carries the browser's session.
const COOKIE_NAME: &str = "binky_session";

/// Largest action body accepted.
const MAX_BODY: usize = 64 * 1024;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// Its own connection to the store could not be opened.
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// The dashboard: the home, its own connection to the store, and who is signed in.
pub struct Dashboard {
    home: Home,
    store: Store,
    trigger: Trigger,
    /// The daemon's runtime: store work runs there, not on a proxy worker's thread.
    runtime: tokio::runtime::Handle,
    sessions: session::Sessions,
    snapshots: snapshot::Snapshots,
}

/// A read's query: `world`, `service`, `n`.
struct Ask {
    world: Option<String>,
    service: Option<String>,
    n: Option<String>,
}

/// What the proxy knows of the dashboard: its host, and how it answers.
#[async_trait::async_trait]
impl crate::proxy::OwnSite for Dashboard {
    fn serves(&self, host: &str) -> bool {
        is_host(host)
    }

    async fn answer(self: Arc<Self>, req: Request<Incoming>, at: Listener) -> Response<Body> {
        self.handle(req, at).await
    }
}

/// `true` when `host` (a `Host` header value) names the dashboard: `binky.localhost`, with
/// a port or not, any case, a trailing dot allowed. (Which port is the listener's business:
/// [`names_listener`].)
pub fn is_host(host: &str) -> bool {
    host_port(host).is_some_and(|(name, port)| {
        is_name(name) && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// `binky.localhost`, any case, with one trailing dot or none.
fn is_name(name: &str) -> bool {
    name.strip_suffix('.')
        .unwrap_or(name)
        .eq_ignore_ascii_case(HOST)
}

/// `true` when `authority` (a `Host` value, or what follows `scheme://` in an `Origin`) is
/// the dashboard on the listener `at`: its name, and `at`'s port, written or (the scheme's
/// default port) left out.
fn names_listener(authority: &str, at: Listener) -> bool {
    let Some((name, port)) = host_port(authority) else {
        return false;
    };
    let port = match port {
        // Digits only: `u16::from_str` takes a `+` too.
        Some(p) if p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok(),
        Some(_) => return false,
        None => Some(at.default_port()),
    };
    is_name(name) && port == Some(at.port)
}

/// The dashboard's own authority on `at`: `binky.localhost:8080` (no port when it is the
/// scheme's default).
fn own_authority(at: Listener) -> String {
    if at.port == at.default_port() {
        HOST.to_owned()
    } else {
        format!("{HOST}:{}", at.port)
    }
}

/// The dashboard's own origin on `at`: `http://binky.localhost:8080`.
fn own_origin(at: Listener) -> String {
    format!("{}://{}", at.scheme, own_authority(at))
}

fn respond(status: StatusCode, ctype: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    resp
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    respond(status, "application/json", v.to_string())
}

/// A refusal: `{"error": why}`.
fn refuse(status: StatusCode, why: impl Into<String>) -> Response<Body> {
    json_response(status, &json!({ "error": why.into() }))
}

fn failure(f: Failure) -> Response<Body> {
    let status = if f.code == crate::failure::exit::USAGE {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::CONFLICT
    };
    refuse(status, f.message)
}

/// The query string's value of `key` (percent-decoded).
fn query<'a>(req: &'a Request<Incoming>, key: &str) -> Option<String> {
    let q: &'a str = req.uri().query()?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| percent_decode(v))
    })
}

/// A query value decoded: `+` is a space (form encoding), then `%xx` as everywhere else
/// (`binky_controllers::url::percent_decode`).
fn percent_decode(s: &str) -> String {
    binky_controllers::url::percent_decode(&s.replace('+', " "))
}

impl Dashboard {
    /// Start the dashboard of `home` on the current (the daemon's) runtime: its own store
    /// connection and the task that builds what the pages are pushed.
    pub fn start(home: &Home, trigger: Trigger) -> Result<Arc<Dashboard>, DashboardError> {
        let store = Store::open(&home.db())?;
        // Browsers used to hold this file's secret as their cookie; sessions replaced it.
        let old_secret = home.root().join("dashboard.key");
        if std::fs::remove_file(&old_secret).is_ok() {
            tracing::info!(path = %old_secret.display(), "removed the dashboard's old secret: a sign-in makes a session now");
        }
        let runtime = tokio::runtime::Handle::current();
        let snapshots = snapshot::Snapshots::start(store.clone(), &runtime);
        Ok(Arc::new(Dashboard {
            home: home.clone(),
            store,
            trigger,
            runtime,
            sessions: session::Sessions::default(),
            snapshots,
        }))
    }

    /// Stop pushing (the daemon stops).
    pub fn stop(&self) {
        self.snapshots.stop();
    }

    /// A one-time sign-in token (the daemon hands it to `binky dashboard`).
    pub fn issue_token(&self) -> Result<String, binky_controllers::random::RandomError> {
        self.sessions.issue_token(Instant::now())
    }

    /// Answer one request whose `Host` names the dashboard, which came in on `at`.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>, at: Listener) -> Response<Body> {
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()))
            .unwrap_or_default();
        if !names_listener(&host, at) {
            return refuse(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "on this port the dashboard answers only to the host {} (this request named `{host}`)",
                    own_authority(at)
                ),
            );
        }
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        match (&method, path.as_str()) {
            (&Method::GET, "/") => respond(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML),
            (&Method::GET, "/app.js") => {
                respond(StatusCode::OK, "text/javascript; charset=utf-8", APP_JS)
            }
            (&Method::GET, "/app.css") => {
                respond(StatusCode::OK, "text/css; charset=utf-8", APP_CSS)
            }
            (&Method::GET, "/login") => self.login(&req, at),
            (_, p) if p.starts_with("/api/") => self.api(req, at, &method, p).await,
            _ => respond(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                format!("binky dashboard: no page {path}; the dashboard is at /\n"),
            ),
        }
    }

    /// An `/api/` request: a POST must come from the dashboard's own page, and every request
    /// but signing out needs a session; then what it asks.
    async fn api(
        self: Arc<Self>,
        req: Request<Incoming>,
        at: Listener,
        method: &Method,
        p: &str,
    ) -> Response<Body> {
        if *method == Method::POST {
            if let Err(why) = origin_ok(req.headers(), at) {
                return refuse(StatusCode::FORBIDDEN, why);
            }
        }
        let ids = session_ids(&req);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        if *method == Method::POST && p == "/api/signout" {
            return self.sign_out(&ids, at);
        }
        let Some(lease) = self.sessions.check(&ids, Instant::now()) else {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "not signed in (or the session ended: signed out, unused for 12 h, or a day old): open the link `binky dashboard` prints",
            );
        };
        match (method, p) {
            (&Method::GET, "/api/session") => json_response(
                StatusCode::OK,
                &json!({"ok": true, "idle_secs": session::IDLE.as_secs(), "max_age_secs": session::MAX_AGE.as_secs()}),
            ),
            (&Method::GET, "/api/stream" | "/api/events" | "/api/logs") => {
                let ask = Ask {
                    world: query(&req, "world"),
                    service: query(&req, "service"),
                    n: query(&req, "n"),
                };
                self.read(ask, p, lease).await
            }
            (&Method::POST, action) => self.post(req, action).await,
            _ => refuse(StatusCode::NOT_FOUND, format!("no {method} {p}")),
        }
    }

    /// `GET /api/stream`, `/api/events` and `/api/logs`. Store reads and the streams' tasks
    /// run on the daemon's runtime: a proxy worker only passes the bytes on.
    async fn read(self: &Arc<Self>, ask: Ask, p: &str, lease: session::Lease) -> Response<Body> {
        let this = self.clone();
        let what = p.to_owned();
        match self
            .runtime
            .spawn(async move {
                match what.as_str() {
                    "/api/stream" => this.snapshots.stream(lease),
                    "/api/events" => this.events(ask).await,
                    _ => this.logs(ask, lease).await,
                }
            })
            .await
        {
            Ok(r) => r,
            Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }

    /// `POST /api/ACTION`: its body read here, the action run on the daemon's runtime.
    async fn post(self: &Arc<Self>, req: Request<Incoming>, action: &str) -> Response<Body> {
        let action = action.trim_start_matches("/api/").to_owned();
        let body = match read_body(req).await {
            Ok(b) => b,
            Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
        };
        let this = self.clone();
        match self
            .runtime
            .spawn(async move { this.act(&action, &body).await })
            .await
        {
            Ok(r) => r,
            Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }

    /// `GET /login?token=T`: a valid one-time token opens a new session, whose id is the
    /// cookie; the session the browser came with, if any, ends.
    fn login(&self, req: &Request<Incoming>, at: Listener) -> Response<Body> {
        let token = query(req, "token").unwrap_or_default();
        let previous = session_ids(req);
        let previous: Vec<&str> = previous.iter().map(String::as_str).collect();
        let id = match self.sessions.sign_in(&token, &previous, Instant::now()) {
            Ok(Some(id)) => id,
            Ok(None) => {
                return respond(
                    StatusCode::FORBIDDEN,
                    "text/html; charset=utf-8",
                    "<!doctype html><meta charset=utf-8><title>binky dashboard</title><p>This sign-in link was used already or is older than ten minutes. Run <code>binky dashboard</code> for a new one.</p>\n",
                )
            }
            Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        // A page that moves on by itself rather than a redirect: a SameSite=Strict cookie is
        // then sent with the next request however the link was opened.
        let mut resp = respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            "<!doctype html><meta charset=utf-8><title>binky dashboard</title><meta http-equiv=refresh content=\"0; url=/\"><p>Signed in. <a href=\"/\">Open the dashboard</a>.</p>\n",
        );
        if let Ok(v) = HeaderValue::from_str(&cookie(&id, session::MAX_AGE.as_secs(), at)) {
            resp.headers_mut().insert(SET_COOKIE, v);
        }
        resp
    }

    /// `POST /api/signout`: the session ends (and its streams with it); the cookie is cleared.
    fn sign_out(&self, ids: &[&str], at: Listener) -> Response<Body> {
        let ended = self.sessions.sign_out(ids, Instant::now());
        let mut resp = json_response(
            StatusCode::OK,
            &json!({"ok": true, "message": if ended { "signed out" } else { "not signed in" }}),
        );
        if let Ok(v) = HeaderValue::from_str(&cookie("", 0, at)) {
            resp.headers_mut().insert(SET_COOKIE, v);
        }
        resp
    }

    fn world_of(&self, ask: &Ask) -> Result<World, Box<Response<Body>>> {
        let id: WorldId = ask
            .world
            .as_deref()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| Box::new(refuse(StatusCode::BAD_REQUEST, "name a world: ?world=ID")))?;
        self.world(id)
    }

    fn world(&self, id: WorldId) -> Result<World, Box<Response<Body>>> {
        match self.store.read(|c| store::world(c, id)) {
            Ok(Some(w)) => Ok(w),
            Ok(None) => Err(Box::new(refuse(
                StatusCode::NOT_FOUND,
                format!("no world {id} (removed meanwhile?)"),
            ))),
            Err(e) => Err(Box::new(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.to_string(),
            ))),
        }
    }

    /// `GET /api/events?world=ID[&n=N]`: the world's events, newest first.
    async fn events(self: Arc<Self>, ask: Ask) -> Response<Body> {
        let world = match self.world_of(&ask) {
            Ok(w) => w,
            Err(r) => return *r,
        };
        let n: usize = ask.n.and_then(|n| n.parse().ok()).unwrap_or(200).min(2000);
        match self
            .store
            .read(|c| store::events(c, &world.project, &world.name, 0, n))
        {
            Ok(evs) => json_response(StatusCode::OK, &json!({ "events": evs })),
            Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }

    /// `GET /api/logs?world=ID[&service=S][&n=N]`: the last lines, then new ones as they are
    /// written (server-sent events).
    async fn logs(self: Arc<Self>, ask: Ask, lease: session::Lease) -> Response<Body> {
        let world = match self.world_of(&ask) {
            Ok(w) => w,
            Err(r) => return *r,
        };
        let service = ask.service.filter(|s| !s.is_empty());
        let n: usize = ask.n.and_then(|n| n.parse().ok()).unwrap_or(200).min(5000);
        let sources = match crate::view::log_sources(&self.store, &self.home.logs(), &world) {
            Ok(s) => s,
            Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
        let sources: Vec<(String, std::path::PathBuf)> = match &service {
            None => sources,
            Some(s) => {
                let picked: Vec<_> = sources
                    .iter()
                    .filter(|(n, _)| {
                        n == s || (n != "hooks" && binky_controllers::replica::service_of(n) == s)
                    })
                    .cloned()
                    .collect();
                if picked.is_empty() {
                    let names: Vec<&str> = sources.iter().map(|(n, _)| n.as_str()).collect();
                    return refuse(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "world `{}` has no log `{s}`; logs: {}",
                            world.name,
                            names.join(", ")
                        ),
                    );
                }
                picked
            }
        };
        let values = crate::scrub::values_for(&world.env, &[]);
        logs::stream(sources, n, crate::scrub::Scrubber::new(&values), lease)
    }

    /// `POST /api/ACTION` with a JSON body: write desired state as the command would.
    async fn act(&self, action: &str, body: &[u8]) -> Response<Body> {
        let args: Value = if body.is_empty() {
            json!({})
        } else {
            match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => {
                    return refuse(
                        StatusCode::BAD_REQUEST,
                        format!("the body is not JSON: {e}"),
                    )
                }
            }
        };
        if action == "approve" {
            return self.approve(&args);
        }
        let Some(id) = args.get("world").and_then(Value::as_i64) else {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("{action} needs {{\"world\": ID}}"),
            );
        };
        let world = match self.world(id) {
            Ok(w) => w,
            Err(r) => return *r,
        };
        if world.deleted {
            return refuse(
                StatusCode::CONFLICT,
                format!("world `{}` is being removed", world.name),
            );
        }
        match action {
            "up" => match crate::requests::start(&self.store, &world) {
                Ok(g) => self.requested(&world, g, "up"),
                Err(f) => failure(f),
            },
            "down" => match crate::requests::down(&self.store, &world) {
                Ok(g) => self.requested(&world, g, "down"),
                Err(f) => failure(f),
            },
            "reload" => match crate::requests::reload(&self.store, &world, None) {
                Ok(g) => self.requested(&world, g, "reload"),
                Err(f) => failure(f),
            },
            "apply" => self.apply(&world, &args),
            "remove" => {
                let confirm = args.get("confirm").and_then(Value::as_str).unwrap_or("");
                if confirm != world.name {
                    return refuse(
                        StatusCode::BAD_REQUEST,
                        format!("type the world's name (`{}`) to remove it", world.name),
                    );
                }
                let force = args.get("force").and_then(Value::as_bool).unwrap_or(false);
                match crate::requests::remove(&self.store, &world, force).await {
                    Ok(g) => self.requested(&world, g, "remove"),
                    Err(f) => failure(f),
                }
            }
            other => refuse(
                StatusCode::NOT_FOUND,
                format!("no action `{other}`; actions: up, down, reload, apply, remove, approve"),
            ),
        }
    }

    /// A request written for `world` at `generation`: wake its controllers and the
    /// snapshots, and say `WORLD: ACTION requested`.
    fn requested(&self, world: &World, generation: i64, action: &str) -> Response<Body> {
        self.trigger.world(world.id);
        self.snapshots.poke();
        json_response(
            StatusCode::OK,
            &json!({"ok": true, "generation": generation, "message": format!("{}: {action} requested", world.name)}),
        )
    }

    /// `POST /api/approve {"key": KEY}`: approve the commands held under KEY.
    fn approve(&self, args: &Value) -> Response<Body> {
        let Some(key) = args.get("key").and_then(Value::as_str) else {
            return refuse(StatusCode::BAD_REQUEST, "approve needs {\"key\": KEY}");
        };
        match crate::requests::approve(&self.store, key) {
            Ok(a) => {
                self.trigger.all();
                self.snapshots.poke();
                json_response(
                    StatusCode::OK,
                    &json!({"ok": true, "message": format!("approved {}: {}", a.what, a.command), "approval": a}),
                )
            }
            Err(f) => failure(f),
        }
    }

    /// `POST /api/apply {"world": ID, "dry_run": B}`: the world's config file against what
    /// it runs, applied unless a dry run (the default).
    fn apply(&self, world: &World, args: &Value) -> Response<Body> {
        let dry_run = args.get("dry_run").and_then(Value::as_bool).unwrap_or(true);
        if let Err(f) = crate::requests::refuse_shared(world, "apply") {
            return failure(f);
        }
        match crate::apply::apply(&self.store, world, dry_run) {
            Ok(crate::apply::Outcome::Unchanged) => json_response(
                StatusCode::OK,
                &json!({"ok": true, "state": "unchanged", "message": format!("{} unchanged; nothing to do", world.config_path.display())}),
            ),
            Ok(crate::apply::Outcome::Changed { plan, generation }) => {
                if !dry_run {
                    self.trigger.world(world.id);
                    self.snapshots.poke();
                }
                json_response(
                    StatusCode::OK,
                    &json!({"ok": true, "state": if dry_run { "would change" } else { "changed" }, "plan": plan.lines().join("\n"), "steps": plan, "generation": generation}),
                )
            }
            Ok(crate::apply::Outcome::Invalid(msg)) => refuse(
                StatusCode::BAD_REQUEST,
                format!("{msg}\nnothing changed: the world keeps running its last good config"),
            ),
            Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

/// The session ids the request's cookies carry (a browser may send more than one of the
/// name).
fn session_ids(req: &Request<Incoming>) -> Vec<String> {
    req.headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(k, v)| *k == COOKIE_NAME && !v.is_empty())
        .map(|(_, v)| v.to_owned())
        .collect()
}

/// The `Set-Cookie` value for session `id`, kept `max_age` seconds (`0`: cleared).
fn cookie(id: &str, max_age: u64, at: Listener) -> String {
    let secure = if at.scheme == "https" { "; Secure" } else { "" };
    format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}")
}

/// An action's `Origin` must be the dashboard's own on the listener it came in on: its
/// scheme, its host and its port.
fn origin_ok(headers: &hyper::HeaderMap, at: Listener) -> Result<(), String> {
    let own = own_origin(at);
    let Some(origin) = headers.get(ORIGIN).and_then(|o| o.to_str().ok()) else {
        return Err(format!(
            "refused: an action needs the Origin header of the dashboard ({own}); it is sent by the dashboard's page"
        ));
    };
    // An origin is `scheme://host[:port]`: a user info or a path makes it another one.
    let ok = Url::parse(origin).is_some_and(|u| {
        u.scheme.eq_ignore_ascii_case(at.scheme)
            && u.userinfo.is_none()
            && u.tail.is_empty()
            && names_listener(u.host, at)
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "refused: this action comes from the page of {origin}, not from the dashboard ({own})"
        ))
    }
}

async fn read_body(req: Request<Incoming>) -> Result<Vec<u8>, String> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes().to_vec()),
        Err(e) => Err(format!("cannot read the request's body: {e}")),
    }
}

/// A server-sent events response over `body`.
fn sse(body: http_body_util::channel::Channel<Bytes>) -> Response<Body> {
    let mut resp = Response::new(crate::proxy::body::streamed(body));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_binky_localhost_is_the_dashboard() {
        assert!(is_host("binky.localhost"));
        assert!(is_host("binky.localhost:8080"));
        assert!(is_host("BINKY.localhost."));
        assert!(!is_host("binky.localhost.evil.com"));
        assert!(!is_host("web.binky.localhost"));
        assert!(!is_host("evil.com"));
        assert!(!is_host("binky.localhost:"));
        assert!(!is_host("binky.localhost:80x"));
    }

    #[test]
    fn the_host_and_origin_must_name_the_listener_they_came_in_on() {
        let http = Listener {
            scheme: "http",
            port: 8080,
        };
        let plain = Listener {
            scheme: "http",
            port: 80,
        };
        let tls = Listener {
            scheme: "https",
            port: 8443,
        };
        assert!(names_listener("binky.localhost:8080", http));
        assert!(names_listener("BINKY.localhost.:8080", http));
        assert!(names_listener("binky.localhost", plain));
        assert!(names_listener("binky.localhost:80", plain));
        for wrong in [
            "binky.localhost:1",
            "binky.localhost",
            "binky.localhost:8443",
            "binky.localhost:08080x",
            "binky.localhost:",
            "binky.localhost:99999999",
            "evil.localhost:8080",
        ] {
            assert!(!names_listener(wrong, http), "{wrong}");
        }
        assert!(!names_listener("binky.localhost:443", plain));
        assert_eq!(own_origin(http), "http://binky.localhost:8080");
        assert_eq!(own_origin(plain), "http://binky.localhost");
        assert_eq!(own_origin(tls), "https://binky.localhost:8443");
        let origin = |o: &str, at: Listener| {
            let mut headers = hyper::HeaderMap::new();
            if !o.is_empty() {
                headers.insert(ORIGIN, HeaderValue::from_str(o).unwrap());
            }
            origin_ok(&headers, at)
        };
        assert!(origin("http://binky.localhost:8080", http).is_ok());
        assert!(origin("http://binky.localhost", plain).is_ok());
        assert!(origin("https://binky.localhost:8443", tls).is_ok());
        for wrong in [
            "https://binky.localhost:8080",
            "http://binky.localhost:8443",
            "http://binky.localhost",
            "http://binky.localhost:1",
            "http://evil.localhost:8080",
            "http://u@binky.localhost:8080",
            "http://binky.localhost:8080/",
            "http://binky.localhost:8080?x",
            "http://[::1]:8080",
            "null",
            "binky.localhost:8080",
            "",
        ] {
            let err = origin(wrong, http).unwrap_err();
            assert!(
                err.contains("http://binky.localhost:8080"),
                "{wrong}: {err}"
            );
        }
        assert!(origin("http://binky.localhost:8443", tls).is_err());
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("x%4"), "x%4");
    }
}
