//! The proxy's own pages: unknown host (a list of what exists), world down, backend
//! failing. Plain text or HTML, by the request's `Accept`.

use std::collections::BTreeMap;

use binky_controllers::route::{Route, RouteTable};
use binky_controllers::store::RouteState;

/// A page: status, title, and lines of text.
pub struct Page {
    /// HTTP status.
    pub status: u16,
    /// One line: what happened.
    pub title: String,
    /// Details, one per line.
    pub lines: Vec<String>,
    /// Routes to list (unknown host page).
    pub listing: Option<RouteTable>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn grouped(table: &RouteTable) -> BTreeMap<(String, String), Vec<&Route>> {
    let mut by: BTreeMap<(String, String), Vec<&Route>> = BTreeMap::new();
    for r in table.routes.values() {
        by.entry((r.project.clone(), r.world.clone()))
            .or_default()
            .push(r);
    }
    by
}

fn scheme(r: &Route) -> &'static str {
    if r.https {
        "https"
    } else {
        "http"
    }
}

impl Page {
    /// Render as `(content type, body)`.
    pub fn render(
        &self,
        html: bool,
        port_suffix: &dyn Fn(&Route) -> String,
    ) -> (&'static str, String) {
        if html {
            let mut b = String::from("<!doctype html><meta charset=utf-8><title>binky</title>");
            b.push_str("<style>body{font:15px/1.5 system-ui,sans-serif;margin:2em auto;max-width:46em;color:#222}code{background:#f3f3f3;padding:0 .2em}li{margin:.2em 0}.s{color:#777;font-size:90%}</style>");
            b.push_str(&format!("<h1>{}</h1>", escape(&self.title)));
            for l in &self.lines {
                b.push_str(&format!("<p>{}</p>", escape(l)));
            }
            if let Some(t) = &self.listing {
                if t.routes.is_empty() {
                    b.push_str("<p>No world has a URL yet: <code>binky up NAME</code> in a repository whose <code>binky.toml</code> gives a service <code>url</code>.</p>");
                }
                for ((project, world), routes) in grouped(t) {
                    b.push_str(&format!(
                        "<h3>{} <span class=s>/ {}</span></h3><ul>",
                        escape(&world),
                        escape(&project)
                    ));
                    for r in routes {
                        let url = format!("{}://{}{}", scheme(r), r.host, port_suffix(r));
                        b.push_str(&format!(
                            "<li><a href=\"{u}/\">{u}</a> <span class=s>→ {} :{} ({})</span></li>",
                            escape(&r.service),
                            r.port,
                            r.state.as_str(),
                            u = escape(&url)
                        ));
                    }
                    b.push_str("</ul>");
                }
            }
            b.push_str("<p class=s>binky proxy</p>\n");
            ("text/html; charset=utf-8", b)
        } else {
            let mut b = format!("{}\n", self.title);
            for l in &self.lines {
                b.push_str(l);
                b.push('\n');
            }
            if let Some(t) = &self.listing {
                if t.routes.is_empty() {
                    b.push_str("no world has a URL yet\n");
                }
                for ((project, world), routes) in grouped(t) {
                    b.push_str(&format!("\n{world} ({project})\n"));
                    for r in routes {
                        b.push_str(&format!(
                            "  {}://{}{}  -> {} :{} ({})\n",
                            scheme(r),
                            r.host,
                            port_suffix(r),
                            r.service,
                            r.port,
                            r.state.as_str()
                        ));
                    }
                }
            }
            ("text/plain; charset=utf-8", b)
        }
    }

    /// No route for this host.
    pub fn unknown_host(host: &str, table: &RouteTable) -> Page {
        Page {
            status: 404,
            title: format!("binky: no world answers to {host}"),
            lines: vec!["These hosts exist:".into()],
            listing: Some(table.clone()),
        }
    }

    /// The route's world or service is stopped.
    pub fn down(r: &Route) -> Page {
        Page {
            status: 503,
            title: format!(
                "binky: {} of world {} ({}) is not running",
                r.service, r.world, r.project
            ),
            lines: vec![r.note.clone()],
            listing: None,
        }
    }

    /// A request the proxy will not route (two `Host` headers…): `why`.
    pub fn bad_request(why: &str) -> Page {
        Page {
            status: 400,
            title: "binky: this request is refused".into(),
            lines: vec![why.to_owned()],
            listing: None,
        }
    }

    /// The backend took the request and sent no answer head within `limit`.
    pub fn timed_out(r: &Route, limit: std::time::Duration) -> Page {
        let waited = humantime::format_duration(limit).to_string();
        let lines = backend_lines(r, format!(
            "127.0.0.1:{}: the service took the request and sent no answer within {waited} (the machine setting proxy_answer_timeout; `binky settings proxy_answer_timeout=5m` waits longer)",
            r.port
        ));
        Page {
            status: 504,
            title: format!(
                "binky: {} of world {} ({}) did not answer in {waited}",
                r.service, r.world, r.project
            ),
            lines,
            listing: None,
        }
    }

    /// The backend could not be reached (or failed mid-way).
    pub fn unreachable(r: &Route, why: &str) -> Page {
        let (status, state) = match r.state {
            RouteState::Starting => (503, "is still starting"),
            RouteState::Failing => (502, "keeps failing"),
            RouteState::Stopped => (503, "is not running"),
            RouteState::Ready => (502, "did not answer"),
        };
        let lines = backend_lines(r, format!("127.0.0.1:{}: {why}", r.port));
        Page {
            status,
            title: format!(
                "binky: {} of world {} ({}) {state}",
                r.service, r.world, r.project
            ),
            lines,
            listing: None,
        }
    }
}

/// A backend's page lines: `first`, the route's note when it has one, and where to look.
fn backend_lines(r: &Route, first: String) -> Vec<String> {
    let mut lines = vec![first];
    if !r.note.is_empty() {
        lines.push(r.note.clone());
    }
    lines.push(format!(
        "`binky status {}` and `binky logs {} {}` say more",
        r.world, r.world, r.service
    ));
    lines
}
