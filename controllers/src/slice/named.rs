//! The servers a world's binky.toml (or environment) names for its slices, as the daemon
//! asks them whether they answer: one slice of each, so a server is asked once for all
//! the worlds on it, whatever their number.

use crate::adapter::{slice_spec, SliceSpec};
use crate::store::{self, DesiredState, SliceState, Store, StoreError, WorldId};

/// A server binky.toml names (not a managed one) that ready slices of running worlds live on.
#[derive(Clone, Debug)]
pub struct NamedServer {
    /// Its admin address, as the slices record it (credentials included).
    pub admin_url: String,
    /// The spec of one of its slices, as that slice was made: what asking it takes.
    pub spec: SliceSpec,
    /// The worlds with a ready slice there.
    pub worlds: Vec<WorldId>,
}

/// Every [`NamedServer`] of the store, each once.
pub fn named_servers(store: &Store) -> Result<Vec<NamedServer>, StoreError> {
    store.read(|c| {
        let managed: Vec<String> = store::servers(c)?
            .into_iter()
            .map(|s| s.admin_url)
            .collect();
        let mut out: Vec<NamedServer> = Vec::new();
        for w in store::worlds(c)? {
            if w.deleted || w.desired != DesiredState::Running {
                continue;
            }
            for row in store::slices(c, w.id)? {
                let Some(url) = row.admin_url.clone() else {
                    continue;
                };
                if row.state != SliceState::Ready || managed.contains(&url) {
                    continue;
                }
                let Some(res) = w.spec.resource(&row.service) else {
                    continue;
                };
                match out.iter_mut().find(|s| s.admin_url == url) {
                    Some(s) if !s.worlds.contains(&w.id) => s.worlds.push(w.id),
                    Some(_) => {}
                    None => {
                        let mut spec = slice_spec(&w, &row.service, res, &row.name, &row.secret);
                        spec.adapter = row.adapter.clone();
                        spec.admin_url = Some(url.clone());
                        out.push(NamedServer {
                            admin_url: url,
                            spec,
                            worlds: vec![w.id],
                        });
                    }
                }
            }
        }
        Ok(out)
    })
}
