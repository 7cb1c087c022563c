//! Shared managed servers lent to drops: a removed world's slice or a golden template is
//! dropped on its server even when `binky servers stop` stopped it; the server is started
//! for the drops and stopped again shortly after the last, unless a world asked for it.

use std::sync::Arc;
use std::time::Duration;

use binky_controllers::store::{self, ServerState};

use super::{Asker, ServerError, ServerName, Servers};

/// A shared server started for drops.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lending {
    /// The drops using it now.
    drops: usize,
    /// Stop it again after the last.
    stop_after: bool,
    /// Counts the times its drops came to none: a stop waits [`LEND_GRACE`] and happens
    /// only if no drop came meanwhile.
    epoch: u64,
}

/// How long a server started for drops stays up after the last one: a template's two
/// databases, or a world's slices, are dropped one after the other, and one start serves
/// them all.
const LEND_GRACE: Duration = Duration::from_secs(3);

/// A drop's hold on a shared managed server it had started (or found started for another
/// drop): give it back with [`Servers::give_back`] once the drop is done.
#[must_use = "give it back with `Servers::give_back`"]
#[derive(Debug)]
pub struct ForDrop {
    name: ServerName,
}

impl Servers {
    /// A world needs the shared server `name`: one started only for drops stays up after
    /// them.
    pub(super) fn keep_lent(&self, name: &ServerName) {
        if let Some(l) = self
            .lent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&name.key())
        {
            l.stop_after = false;
        }
    }

    /// A drop that could not start the server holds it no more (nothing to stop after).
    fn forget_lending(&self, lending: &ForDrop) {
        let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = lent.get_mut(&lending.name.key()) {
            l.drops = l.drops.saturating_sub(1);
            if l.drops == 0 {
                lent.remove(&lending.name.key());
            }
        }
    }

    /// For a drop (a removed world's slice, a golden template) on the shared managed server
    /// whose admin address is `url`: that server, started when it is not running (the drop
    /// needs it, and a managed server is binky's to start), held until
    /// [`Servers::give_back`]. `None` when `url` is no shared managed server's, or it runs
    /// and no other drop started it. A server `binky servers stop` stopped is stopped again
    /// after the last drop, unless a world asked for it meanwhile.
    pub async fn for_drop(&self, url: &str) -> Result<Option<ForDrop>, ServerError> {
        let row = self
            .store
            .read(store::servers)?
            .into_iter()
            .find(|r| r.admin_url == url);
        let Some(name) = row
            .as_ref()
            .and_then(|r| ServerName::parse(&r.kind))
            .filter(|n| n.slice.is_none())
        else {
            return Ok(None);
        };
        let key = name.key();
        let joined = match self
            .lent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key)
        {
            Some(l) => {
                l.drops += 1;
                true
            }
            None => false,
        };
        if joined {
            let lending = ForDrop { name };
            // Started for another drop: it may have been stopped since.
            if let Err(err) = self.start(&lending.name, None, Asker::Slice).await {
                self.forget_lending(&lending);
                return Err(err);
            }
            return Ok(Some(lending));
        }
        let lock = self.lock_of(&name);
        let stopped = {
            let _guard = lock.lock().await;
            match self.row(&name)? {
                Some(r) if Self::alive(&r) && r.state == ServerState::Running => return Ok(None),
                Some(r) => r.state == ServerState::Stopped,
                None => return Ok(None),
            }
        };
        self.lent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .and_modify(|l| l.drops += 1)
            .or_insert(Lending {
                drops: 1,
                stop_after: stopped,
                epoch: 0,
            });
        let lending = ForDrop { name };
        if let Err(err) = self.start(&lending.name, None, Asker::Slice).await {
            self.forget_lending(&lending);
            return Err(err);
        }
        tracing::info!(server = %lending.name, "started the managed server to finish a drop");
        Ok(Some(lending))
    }

    /// A drop is done with the server it held: shortly after the last (see [`LEND_GRACE`]),
    /// one `binky servers stop` had stopped (and no world asked for since) is stopped again.
    pub async fn give_back(self: &Arc<Self>, lending: ForDrop) {
        let key = lending.name.key();
        let epoch = {
            let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
            let Some(l) = lent.get_mut(&key) else {
                return;
            };
            l.drops = l.drops.saturating_sub(1);
            if l.drops > 0 {
                return;
            }
            if !l.stop_after {
                lent.remove(&key);
                return;
            }
            l.epoch += 1;
            l.epoch
        };
        let servers = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(LEND_GRACE).await;
            servers.stop_after_drops(&lending.name, epoch).await;
        });
    }

    /// Stop `name` again, started for drops that are done, unless one came since `epoch`
    /// or a world asked for it.
    async fn stop_after_drops(&self, name: &ServerName, epoch: u64) {
        {
            let mut lent = self.lent.lock().unwrap_or_else(|e| e.into_inner());
            match lent.get(&name.key()) {
                Some(l) if l.drops == 0 && l.epoch == epoch => {
                    let stop = l.stop_after;
                    lent.remove(&name.key());
                    if !stop {
                        return;
                    }
                }
                _ => return,
            }
        }
        let lock = self.lock_of(name);
        let _guard = lock.lock().await;
        let stopped = match self.row(name) {
            Ok(Some(row)) => {
                self.stop_locked(&row, name.kind.stop_signal(), Duration::from_secs(10))
                    .await
            }
            Ok(None) => return,
            Err(e) => Err(e.into()),
        };
        match stopped {
            Ok(_) => {
                tracing::info!(server = %name, "stopped the managed server again after its drops (`binky servers stop` had stopped it)")
            }
            Err(err) => {
                tracing::warn!(server = %name, %err, "cannot stop the managed server again after its drops")
            }
        }
    }
}
