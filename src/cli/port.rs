//! `binky port [--proxy N] [--https N]`: where the proxy listens.

use std::time::{Duration, Instant};

use binky_controllers::store::{self, DEFAULT_HTTPS_PORT, DEFAULT_PROXY_PORT};

use super::context::{Ctx, Failure};
use super::exit;
use crate::daemon::client;
use crate::protocol::Request;

/// Print what the proxy serves on, and why when it is not what was asked for.
pub fn describe(ctx: &Ctx) -> Result<String, Failure> {
    let wanted = |key: &str, default: u16| -> Result<String, Failure> {
        Ok(match ctx.store.read(|c| store::setting(c, key))? {
            Some(v) if v == "0" => "off".into(),
            Some(v) => v,
            None => default.to_string(),
        })
    };
    let (http, https) = (
        wanted("proxy_port", DEFAULT_PROXY_PORT)?,
        wanted("https_port", DEFAULT_HTTPS_PORT)?,
    );
    let mut out = String::new();
    match ctx.store.read(store::proxy_status)? {
        Some(s) => {
            let show =
                |p: Option<u16>| p.map_or("not served".to_owned(), |p| format!("127.0.0.1:{p}"));
            out.push_str(&format!(
                "proxy: http {} (asked: {http}), https {} (asked: {https})\n",
                show(s.http_port),
                show(s.https_port)
            ));
            for note in [&s.http_note, &s.https_note] {
                if !note.is_empty() {
                    out.push_str(&format!("  {note}\n"));
                }
            }
        }
        None => out.push_str(&format!(
            "proxy: http {http}, https {https} (the daemon has not started the proxy yet)\n"
        )),
    }
    Ok(out)
}

/// `binky port`.
pub async fn run(proxy: Option<u16>, https: Option<u16>) -> Result<i32, Failure> {
    let ctx = Ctx::open()?;
    if proxy.is_none() && https.is_none() {
        print!("{}", describe(&ctx)?);
        return Ok(exit::OK);
    }
    // The proxy's ports are the machine's, which every world's URLs name: a person's
    // (`guard`, before this runs).
    if let Some(p) = proxy {
        ctx.store.set_setting("proxy_port", &p.to_string())?;
    }
    if let Some(p) = https {
        ctx.store.set_setting("https_port", &p.to_string())?;
    }
    let before = ctx
        .store
        .read(store::proxy_status)?
        .map(|s| s.updated_at)
        .unwrap_or(0);
    match client::request(&ctx.home, &Request::Reconfigure, Duration::from_secs(5)).await {
        Ok(_) => {
            let until = Instant::now() + Duration::from_secs(5);
            while ctx
                .store
                .read(store::proxy_status)?
                .map(|s| s.updated_at)
                .unwrap_or(0)
                <= before
            {
                if Instant::now() > until {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            print!("{}", describe(&ctx)?);
        }
        Err(client::ClientError::NotRunning) => {
            println!("saved; the daemon serves on them when it starts (`binky daemon start`)");
        }
        Err(e) => return Err(e.into()),
    }
    Ok(exit::OK)
}
