//! Asking the servers binky.toml names (an `admin_url`, or an adapter's environment
//! variable) whether they answer, while the daemon runs: each such server a ready slice of
//! a running world lives on is asked every few seconds, once for all its worlds, through
//! its adapter (the same question the drift check asks: is the slice there). A server that
//! stops answering is said — an event `server_unreachable` on every world on it, and its
//! worlds' `SlicesReady` at False, reason `ServerUnavailable`, naming it — and so is its
//! return (`server_back`). Nothing else is done: binky does not run such a server.
//!
//! The answers live in memory ([`Answers`]): the slice controller reads them through
//! [`binky_controllers::adapter::SliceEffects::unanswered`], and a restarted daemon asks
//! again before it says anything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use binky_controllers::adapter::{SliceEffects, SliceFault};
use binky_controllers::runtime::Trigger;
use binky_controllers::slice::{named_servers, NamedServer};
use binky_controllers::store::Store;
use tokio::sync::Notify;

use super::RealSlices;

/// How often each named server is asked.
pub const EVERY: Duration = Duration::from_secs(5);
/// How long one server may take to answer (a server that hangs is one that does not
/// answer; the adapters' own connect timeouts are 5 s).
const PATIENCE: Duration = Duration::from_secs(8);

/// The named servers that did not answer when last asked: admin URL → why.
#[derive(Default)]
pub struct Answers(Mutex<HashMap<String, String>>);

impl Answers {
    /// Why the server at `admin_url` did not answer when last asked, if it did not.
    pub fn why_not(&self, admin_url: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(admin_url)
            .cloned()
    }

    /// Record the server at `admin_url`'s answer (`why_not`: none when it answered); the
    /// one it had before.
    fn set(&self, admin_url: &str, why_not: Option<String>) -> Option<String> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match why_not {
            Some(why) => map.insert(admin_url.to_owned(), why),
            None => map.remove(admin_url),
        }
    }

    /// Forget the servers no ready slice lives on any more.
    fn keep_only(&self, servers: &[NamedServer]) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|url, _| servers.iter().any(|s| s.admin_url == *url));
    }
}

/// Ask the named servers through `slices` until `stop` is notified.
pub async fn run(slices: RealSlices, store: Store, trigger: Trigger, stop: Arc<Notify>) {
    loop {
        tokio::select! {
            _ = stop.notified() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
        let servers = match named_servers(&store) {
            Ok(s) => s,
            Err(err) => {
                tracing::warn!(%err, "named servers: cannot read the slices");
                continue;
            }
        };
        slices.answers().keep_only(&servers);
        // Asked together: one that hangs does not hold the others' answers.
        let mut asking = tokio::task::JoinSet::new();
        for (i, server) in servers.iter().enumerate() {
            let (slices, server) = (slices.clone(), server.clone());
            asking.spawn(async move { (i, ask(&slices, &server).await) });
        }
        let mut answers: Vec<Option<Option<String>>> = vec![None; servers.len()];
        while let Some(done) = asking.join_next().await {
            if let Ok((i, why_not)) = done {
                answers[i] = Some(why_not);
            }
        }
        for (server, why_not) in servers.iter().zip(answers) {
            // A task that panicked asked nothing: nothing is said of its server.
            let Some(why_not) = why_not else {
                continue;
            };
            let before = slices.answers().set(&server.admin_url, why_not.clone());
            let shown = binky_controllers::url::redact_server(&server.admin_url);
            let said = match (&before, &why_not) {
                (None, Some(why)) => {
                    tracing::warn!(server = %shown, %why, "a server binky.toml names does not answer");
                    Some((
                        "server_unreachable",
                        format!(
                            "the {} server {shown} does not answer ({why}); the world waits for it",
                            server.spec.adapter
                        ),
                    ))
                }
                (Some(_), None) => {
                    tracing::info!(server = %shown, "a server binky.toml names answers again");
                    Some((
                        "server_back",
                        format!("the {} server {shown} answers again", server.spec.adapter),
                    ))
                }
                _ => None,
            };
            if let Some((kind, msg)) = said {
                for world in &server.worlds {
                    if let Err(err) = store.event(*world, kind, &msg) {
                        tracing::warn!(%err, "named servers: cannot write an event");
                    }
                    trigger.world(*world);
                }
            }
        }
    }
}

/// Whether `server` answers: none when it does, else why not. A server that answers with a
/// refusal (a lost slice, a changed password) answers: that is the slice controller's to
/// say and heal.
async fn ask(slices: &RealSlices, server: &NamedServer) -> Option<String> {
    match tokio::time::timeout(PATIENCE, slices.exists(&server.spec)).await {
        Ok(Ok(_)) | Ok(Err(SliceFault::Permanent(_))) => None,
        Ok(Err(SliceFault::Transient(e))) => Some(
            crate::adapters::error_chain(e.as_ref())
                .lines()
                .next()
                .unwrap_or("")
                .to_owned(),
        ),
        Err(_) => Some(format!("no answer within {} s", PATIENCE.as_secs())),
    }
}
