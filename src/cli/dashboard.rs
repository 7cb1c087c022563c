//! `binky dashboard`: the web dashboard's sign-in link (printed, and opened in a browser
//! when there is a display and no `--no-open`). The link carries a one-time token the
//! daemon exchanges for a new session, kept by the browser as an HttpOnly cookie.

use std::time::Duration;

use binky_controllers::store;

use super::context::{Ctx, Failure};
use super::exit;
use crate::daemon::client;
use crate::protocol::Request;

/// The dashboard's address on the proxy's ports, `http://binky.localhost:8080` (the HTTP
/// port when the proxy serves one, else the HTTPS port).
pub fn address(ctx: &Ctx) -> Result<String, Failure> {
    let proxy = ctx.store.read(store::proxy_status)?;
    let (http, https) = proxy
        .as_ref()
        .map_or((None, None), |p| (p.http_port, p.https_port));
    let host = crate::dashboard::HOST;
    match (http.filter(|p| *p != 0), https.filter(|p| *p != 0)) {
        (Some(80), _) => Ok(format!("http://{host}")),
        (Some(p), _) => Ok(format!("http://{host}:{p}")),
        (None, Some(443)) => Ok(format!("https://{host}")),
        (None, Some(p)) => Ok(format!("https://{host}:{p}")),
        (None, None) => Err(Failure::failed(format!(
            "the proxy serves on no port, so neither does the dashboard{}; `binky port` shows and sets its ports",
            proxy
                .map(|p| format!(" ({})", [p.http_note, p.https_note].join("; ").trim_matches([';', ' '])))
                .unwrap_or_default()
        ))),
    }
}

/// `binky dashboard`.
pub async fn run(no_open: bool, json: bool) -> Result<i32, Failure> {
    // The link signs a browser in with every button a person has (approving among them):
    // only a person at a terminal gets here (`guard`).
    let ctx = Ctx::open()?;
    client::ensure(&ctx.home).await?;
    let answer =
        client::request(&ctx.home, &Request::DashboardToken, Duration::from_secs(5)).await?;
    let token = answer.token.ok_or_else(|| {
        Failure::failed(
            "the daemon gave no sign-in token (an older binky daemon? `binky daemon stop`, and the next command starts this one)",
        )
    })?;
    let url = format!("{}/login?token={token}", address(&ctx)?);
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    let opened = !no_open && display && open(&url);
    if json {
        println!(
            "{}",
            serde_json::json!({"url": url, "opened": opened, "expires_in_secs": 600})
        );
        return Ok(exit::OK);
    }
    println!("{url}");
    eprintln!(
        "binky: {} this link to sign this browser in to the dashboard (it works once, for ten minutes)",
        if opened { "opened" } else { "open" }
    );
    Ok(exit::OK)
}

/// Hand `url` to the desktop's browser; `false` when that could not be started.
fn open(url: &str) -> bool {
    std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
