//! The slice controller: each adapter service of a world has its own slice of a shared
//! server (a database with its own role, a key prefix with its own ACL user, …).
//!
//! # Guarantees
//! - A slice is provisioned, then `migrate` and `seed` run once with its address in the
//!   environment (`DATABASE_URL`, as binky 0.1.2 does, and `${svc.url}`), before any process
//!   that depends on it starts (the process controller waits for `ready`).
//! - `migrate` runs again when its text changes; `seed` runs once per world.
//! - A server that is down or refuses the admin credentials is retried with backoff; the
//!   world waits with a condition naming the server and the error, and comes up by itself.
//! - A failing `migrate` or `seed` fails the world with the command's output tail, touching
//!   nothing of other worlds; the next `binky up` tries again.
//! - Slices are torn down on removal, after the world's processes have stopped; a crash in
//!   the middle is finished by the next daemon (the finalizer stays until it is done).
//! - A slice whose service left `binky.toml` is kept (it holds data) until the world goes.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::params;
use sha2::{Digest, Sha256};

use crate::env::{self, Layout};
use crate::process::{SpawnSpec, Supervisor};
use crate::runtime::{Action, Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::spec::Resource;
use crate::store::{self, now_ms, owner, SliceRow, Store, StoreError, World};

/// Why `res`'s server settings cannot be resolved for `world`: an `${env.NAME}` in its
/// `admin_url` or options that the environment of `binky up` did not have.
pub(crate) fn unset_settings(world: &World, res: &Resource) -> Option<String> {
    let t = crate::tokens::Tokens {
        env: world.env.clone(),
        ..Default::default()
    };
    let fields = res.token_fields().into_iter();
    let mut settings = fields.filter(|(field, _)| Resource::is_server_setting(field));
    settings.find_map(|(field, text)| {
        let u = t.unset_env(text).into_iter().next()?;
        Some(format!(
            "{field} comes from ${{env.{}}}, which is not set{}",
            u.name,
            u.message.map(|m| format!(" ({m})")).unwrap_or_default()
        ))
    })
}

/// What to say of the ready slices in `rows` (of the `wanted` services) whose managed server
/// (the server row with the slice's admin address) is not running.
fn servers_down(
    servers: &[store::ServerRow],
    rows: &BTreeMap<String, SliceRow>,
    wanted: &[(String, Resource)],
) -> Vec<String> {
    rows.values()
        .filter(|r| r.state == "ready" && wanted.iter().any(|(s, _)| *s == r.service))
        .filter_map(|r| {
            let url = r.admin_url.as_deref()?;
            let server = servers
                .iter()
                .find(|s| s.admin_url == url && s.state != "running")?;
            let why = match server.state.as_str() {
                "down" => "it stopped running; binky is starting it again".to_owned(),
                "stopped" => {
                    "`binky servers stop` stopped it; the next `binky up` starts it".to_owned()
                }
                other if server.message.is_empty() => format!("it is {other}"),
                other => format!("it is {other}: {}", server.message),
            };
            Some(format!(
                "{}: the managed {} server its slice lives on is not running ({why})",
                r.service, server.kind
            ))
        })
        .collect()
}

/// Finalizer and controller name.
pub const NAME: &str = "slice";
/// The condition this controller reports.
pub const CONDITION: &str = "SlicesReady";

/// Everything an adapter needs to make or find one slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSpec {
    /// Adapter name.
    pub adapter: String,
    /// The slice's name.
    pub slice: String,
    /// Its password.
    pub secret: String,
    /// The server's admin address (tokens resolved); none: binky's managed server.
    pub admin_url: Option<String>,
    /// `options`, tokens resolved.
    pub options: BTreeMap<String, String>,
    /// `buckets`.
    pub buckets: Vec<String>,
    /// `PATH` of the `binky up` that wrote the world: where external adapters are looked
    /// up (not the daemon's own `PATH`, which is whatever its first command had).
    pub search_path: Option<String>,
}

/// A provisioned slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceAddress {
    /// The address a service's client takes as is.
    pub url: String,
    /// Extra tokens (`prefix`, …).
    pub tokens: BTreeMap<String, String>,
    /// The admin address actually used (a managed server's, when none was given).
    pub admin_url: Option<String>,
}

/// Why a slice could not be made or dropped.
#[derive(Debug, thiserror::Error)]
pub enum SliceFault {
    /// Retrying may help (the server is down, the credentials are refused).
    #[error("{0}")]
    Transient(String),
    /// Retrying will not help until the configuration changes.
    #[error("{0}")]
    Permanent(String),
}

/// The slice effects: adapters, and managed servers behind them.
pub trait SliceEffects: Send + Sync + 'static {
    /// Make the slice if it does not exist, and say where it is.
    fn provision(
        &self,
        spec: &SliceSpec,
    ) -> impl Future<Output = Result<SliceAddress, SliceFault>> + Send;
    /// Remove the slice and its credentials.
    fn teardown(&self, spec: &SliceSpec) -> impl Future<Output = Result<(), SliceFault>> + Send;
    /// Can this adapter copy a slice server-side?
    fn can_clone(&self, spec: &SliceSpec) -> impl Future<Output = Result<bool, SliceFault>> + Send;
    /// Copy the template `from` into the new slice `to`, and say where it is.
    fn clone_into(
        &self,
        from: &SliceSpec,
        to: &SliceSpec,
    ) -> impl Future<Output = Result<SliceAddress, SliceFault>> + Send;
    /// Make a migrated and seeded slice a template (closed, ready to be copied).
    fn seal(&self, template: &SliceSpec) -> impl Future<Output = Result<(), SliceFault>> + Send;
    /// Is the slice still on its server? `None`: the adapter cannot tell.
    fn exists(
        &self,
        spec: &SliceSpec,
    ) -> impl Future<Output = Result<Option<bool>, SliceFault>> + Send {
        let _ = spec;
        async { Ok(None) }
    }
}

/// How often a ready slice is checked for having been dropped from outside binky.
pub const DRIFT_CHECK: Duration = Duration::from_secs(10);

/// Why the slice controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum SliceError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A server is not reachable yet.
    #[error("{service}: waiting for its {adapter} server: {detail}; retrying")]
    Waiting {
        /// The service.
        service: String,
        /// Its adapter.
        adapter: String,
        /// What the adapter said.
        detail: String,
    },
}

impl ReconcileError for SliceError {
    fn reason(&self) -> &'static str {
        match self {
            SliceError::Store(_) => "StoreFailed",
            SliceError::Waiting { .. } => "ServerUnavailable",
        }
    }
}

/// A slice name: `bk_<project>_<world>_<service>`, lower case, `[a-z0-9_]`, at most 63
/// characters (PostgreSQL's limit, the tightest of the servers here); a name that had to be
/// shortened ends in a hash of the full one, so it stays unique.
pub fn slice_name(project: &str, world: &str, service: &str) -> String {
    let full = format!("bk_{project}_{world}_{service}");
    let mut name: String = full
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() > 63 || name != full.to_ascii_lowercase() {
        let digest = Sha256::digest(full.as_bytes());
        let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        name.truncate(54);
        name = format!("{}_{hash}", name.trim_end_matches('_'));
    }
    name
}

/// A new random secret (hex, 144 bits, from the kernel's CSPRNG).
pub fn random_secret() -> String {
    use std::io::Read;
    let mut buf = [0u8; 18];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)) {
        Ok(()) => buf.iter().map(|b| format!("{b:02x}")).collect(),
        // Never reached on Linux; still not a constant.
        Err(_) => format!("{:x}{:x}", now_ms(), std::process::id()),
    }
}

fn hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The slice controller.
pub struct SliceController<E, S> {
    store: Store,
    effects: E,
    sup: Arc<S>,
    logs_dir: std::path::PathBuf,
    command_timeout: Duration,
    /// `(world, service) → generation` of the last provision by this daemon: a ready slice
    /// is provisioned again (idempotently) once per daemon and per `binky up`, which heals
    /// a server that lost it (a restart without persistence, a dropped database).
    healed: std::sync::Mutex<std::collections::HashMap<(i64, String), i64>>,
    /// `(world, service) →` when a ready slice was last found on its server.
    checked: std::sync::Mutex<std::collections::HashMap<(i64, String), std::time::Instant>>,
}

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// A controller over `store`, making slices with `effects`, running `migrate`/`seed`
    /// with `sup`, logging to `logs_dir`.
    pub fn new(store: Store, effects: E, sup: Arc<S>, logs_dir: std::path::PathBuf) -> Self {
        SliceController {
            store,
            effects,
            sup,
            logs_dir,
            command_timeout: Duration::from_secs(30 * 60),
            healed: Default::default(),
            checked: Default::default(),
        }
    }

    fn save(&self, world: &World, row: &SliceRow) -> Result<(), StoreError> {
        let tokens = serde_json::to_string(&row.tokens).unwrap_or_else(|_| "{}".into());
        self.store.write(owner::Slice, |tx| {
            tx.execute(
                "INSERT INTO slices (world_id, service, adapter, name, secret, state, address, tokens,
                    admin_url, migrate_hash, seed_hash, failed_generation, message, updated_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14
                 WHERE EXISTS (SELECT 1 FROM worlds WHERE id = ?1)
                 ON CONFLICT (world_id, service) DO UPDATE SET adapter = excluded.adapter,
                    name = excluded.name, secret = excluded.secret, state = excluded.state,
                    address = excluded.address, tokens = excluded.tokens,
                    admin_url = excluded.admin_url, migrate_hash = excluded.migrate_hash,
                    seed_hash = excluded.seed_hash, failed_generation = excluded.failed_generation,
                    message = excluded.message, updated_at = excluded.updated_at",
                params![
                    world.id,
                    row.service,
                    row.adapter,
                    row.name,
                    row.secret,
                    row.state,
                    row.address,
                    tokens,
                    row.admin_url,
                    row.migrate_hash,
                    row.seed_hash,
                    row.failed_generation,
                    row.message,
                    now_ms()
                ],
            )?;
            Ok(())
        })
    }

    fn event(&self, world: &World, kind: &str, msg: &str) {
        if let Err(err) = self.store.event(world.id, kind, msg) {
            tracing::warn!(%err, "cannot record event");
        }
    }

    /// Pretend every drift check happened `ago` earlier (a test cannot wait DRIFT_CHECK).
    #[cfg(test)]
    pub(crate) fn age_drift_checks(&self, ago: Duration) {
        let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        for at in checked.values_mut() {
            *at = at.checked_sub(ago).expect("the clock started long ago");
        }
    }

    /// The effects this controller uses.
    pub(crate) fn effects(&self) -> &E {
        &self.effects
    }

    pub(crate) fn spec_of(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        row: &SliceRow,
    ) -> SliceSpec {
        // Adapter settings see the environment of `binky up` (`${env.X}`), nothing else.
        let t = crate::tokens::Tokens {
            world: world.name.clone(),
            env: world.env.clone(),
            ..Default::default()
        };
        SliceSpec {
            adapter: res.adapter.clone(),
            slice: row.name.clone(),
            secret: row.secret.clone(),
            admin_url: res.admin_url.as_ref().map(|u| t.resolve(u, service)),
            options: res
                .options
                .iter()
                .map(|(k, v)| (k.clone(), t.resolve(v, service)))
                .collect(),
            buckets: res.buckets.clone(),
            search_path: world.env.get("PATH").cloned(),
        }
    }

    /// Run `migrate` or `seed` against the slice; the error is the message to show.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_command(
        &self,
        world: &World,
        layout: &Layout,
        service: &str,
        res: &Resource,
        which: &str,
        cmd: &str,
        address: &SliceAddress,
    ) -> Result<(), String> {
        let ports = self
            .store
            .read(|c| store::ports(c, world.id))
            .map_err(|e| e.to_string())?;
        let proxy = self
            .store
            .read(store::proxy_view)
            .map_err(|e| e.to_string())?;
        let slices = self
            .store
            .read(|c| store::slices(c, world.id))
            .map_err(|e| e.to_string())?;
        let mut tokens = env::tokens(world, &ports, &proxy, &slices);
        tokens.urls.insert(service.to_owned(), address.url.clone());
        let (workdir, e) =
            env::adapter_command_env(world, layout, service, res, &tokens, &address.url);
        let log = crate::process::ProcessController::<S>::log_path(&self.logs_dir, world, service);
        let spec = SpawnSpec {
            world: world.id,
            service: service.to_owned(),
            cmd: tokens.resolve(cmd, service),
            workdir,
            env: e,
            log: log.clone(),
            token: self.sup.token(world.id),
            task: true,
        };
        let started = std::time::Instant::now();
        match self.sup.run(&spec, self.command_timeout).await {
            Ok(exit) if exit.success() => {
                self.event(
                    world,
                    which,
                    &format!(
                        "{service}: {which} finished in {:.1}s",
                        started.elapsed().as_secs_f64()
                    ),
                );
                Ok(())
            }
            other => {
                let why = match other {
                    Ok(exit) => exit.to_string(),
                    Err(err) => err.to_string(),
                };
                Err(format!(
                    "{which} `{}` failed ({why}); fix it and run `binky up {}` again. Last output:\n{}",
                    spec.cmd,
                    world.name,
                    crate::process::log_tail(&log, 10)
                ))
            }
        }
    }
}

/// What trying to clone a new slice from its golden template came to.
enum CloneOutcome {
    /// Copied.
    Cloned(SliceAddress),
    /// The template is not ready yet.
    Wait(String),
    /// The template failed: no world is cloned from it.
    Failed(String),
    /// Make the slice the slow way (an event says why).
    Fallback,
}

impl<E: SliceEffects, S: Supervisor> SliceController<E, S> {
    /// A slice is ready at this generation: record it (and that this daemon healed it).
    fn mark_ready(
        &self,
        world: &World,
        row: &mut SliceRow,
        key: (i64, String),
    ) -> Result<String, SliceError> {
        row.state = "ready".into();
        row.failed_generation = None;
        row.message = String::new();
        self.save(world, row)?;
        self.healed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, world.generation);
        Ok(format!("{}={}", row.service, row.name))
    }

    async fn clone_from_golden(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        spec: &SliceSpec,
    ) -> Result<CloneOutcome, SliceError> {
        // The reference is the golden controller's: until it has looked at this generation,
        // it may still name the template of the last one (a failed build the user has fixed
        // since), which must not fail this `up`.
        let golden_seen = self
            .store
            .read(|c| store::observed_generations(c, world.id))?
            .get(crate::golden::NAME)
            .is_some_and(|g| *g >= world.generation);
        if !golden_seen {
            return Ok(CloneOutcome::Wait("waiting for its golden template".into()));
        }
        let key = self
            .store
            .read(|c| store::golden_ref(c, world.id, service))?;
        let Some(key) = key else {
            return match self.effects.can_clone(spec).await {
                Ok(false) | Err(SliceFault::Permanent(_)) => {
                    self.event(
                        world,
                        "clone_fallback",
                        &format!("{service}: adapter {} cannot clone; provisioning and running migrate and seed", res.adapter),
                    );
                    Ok(CloneOutcome::Fallback)
                }
                _ => Ok(CloneOutcome::Wait("waiting for its golden template".into())),
            };
        };
        let Some(g) = self.store.read(|c| store::golden(c, &key))? else {
            return Ok(CloneOutcome::Wait("waiting for its golden template".into()));
        };
        match g.state.as_str() {
            "ready" => {}
            "failed" => {
                return Ok(CloneOutcome::Failed(format!(
                    "golden template {} failed: {}",
                    g.name, g.output
                )))
            }
            _ => {
                return Ok(CloneOutcome::Wait(format!(
                    "golden template {} is being built",
                    g.name
                )))
            }
        }
        let template = SliceSpec {
            slice: g.name.clone(),
            secret: g.secret.clone(),
            admin_url: g.admin_url.clone().or_else(|| spec.admin_url.clone()),
            ..spec.clone()
        };
        let started = std::time::Instant::now();
        match self.effects.clone_into(&template, spec).await {
            Ok(address) => {
                self.event(
                    world,
                    "slice",
                    &format!(
                        "{service}: cloned {} slice {} from golden template {} in {} ms",
                        res.adapter,
                        spec.slice,
                        g.name,
                        started.elapsed().as_millis()
                    ),
                );
                Ok(CloneOutcome::Cloned(address))
            }
            Err(SliceFault::Transient(detail)) => Err(SliceError::Waiting {
                service: service.to_owned(),
                adapter: res.adapter.clone(),
                detail,
            }),
            Err(SliceFault::Permanent(detail)) => {
                self.event(
                    world,
                    "clone_fallback",
                    &format!("{service}: cloning from golden template {} failed ({detail}); provisioning and running migrate and seed instead", g.name),
                );
                Ok(CloneOutcome::Fallback)
            }
        }
    }
}

impl<E: SliceEffects, S: Supervisor> Controller for SliceController<E, S> {
    type Error = SliceError;

    fn name(&self) -> &'static str {
        NAME
    }

    fn condition_type(&self) -> &'static str {
        CONDITION
    }

    async fn apply(&self, world: &World) -> Result<Applied, SliceError> {
        // The admission gate: nothing of a held world starts.
        if let Some(held) = crate::gate::hold(&self.store, world, CONDITION)? {
            return Ok(held);
        }
        let selected = world.spec.selected(world.group.as_deref());
        let wanted: Vec<(String, Resource)> = world
            .spec
            .start_order()
            .unwrap_or_else(|_| world.spec.services.keys().cloned().collect())
            .into_iter()
            .filter(|n| selected.contains(n))
            .filter_map(|n| world.spec.services[&n].resource().cloned().map(|r| (n, r)))
            .collect();
        if wanted.is_empty() {
            return Ok(Applied {
                action: Action::AwaitChange,
                conditions: vec![Condition::ok(CONDITION, "NoSlices", "no adapter services")],
            });
        }
        // Provisioning needs no worktree; only migrate and seed (run in it) wait for one.
        let layout = self
            .store
            .read(|c| store::worktree(c, world.id))?
            .filter(|w| w.state == "ready")
            .map(|w| Layout { worktree: w.path });
        let rows: BTreeMap<String, SliceRow> = self
            .store
            .read(|c| store::slices(c, world.id))?
            .into_iter()
            .map(|r| (r.service.clone(), r))
            .collect();
        // The managed servers, to say when one a slice lives on is down.
        let servers = self.store.read(store::servers)?;
        let mut ready = Vec::new();
        for (service, res) in &wanted {
            let mut row = rows.get(service).cloned().unwrap_or_else(|| SliceRow {
                service: service.clone(),
                adapter: res.adapter.clone(),
                name: slice_name(&world.project, &world.name, service),
                secret: random_secret(),
                state: "provisioning".into(),
                address: None,
                tokens: BTreeMap::new(),
                admin_url: None,
                migrate_hash: None,
                seed_hash: None,
                failed_generation: None,
                message: String::new(),
            });
            if row.state == "failed" && row.failed_generation == Some(world.generation) {
                return Ok(Applied {
                    action: Action::AwaitChange,
                    conditions: vec![Condition::failed(
                        CONDITION,
                        "SliceFailed",
                        format!("{service}: {}", row.message),
                    )],
                });
            }
            let key = (world.id, service.clone());
            let healed = self
                .healed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .copied()
                == Some(world.generation);
            let spec = self.spec_of(world, service, res, &row);
            // An admin_url (or option) from a variable `binky up` did not have: say exactly
            // that, not "admin_url is not a URL".
            if let Some(why) = unset_settings(world, res) {
                return Ok(Applied {
                    action: Action::AwaitChange,
                    conditions: vec![Condition::failed(
                        CONDITION,
                        "EnvUnset",
                        format!("{service}: {why}; set it in the environment of `binky up` and run `binky up {}` again", world.name),
                    )],
                });
            }
            // Drift: a slice dropped from outside binky is made again, migrated and seeded
            // (or cloned), not left empty. Checked at every new generation and otherwise at
            // most every DRIFT_CHECK.
            if row.state == "ready" && row.adapter == res.adapter {
                let due = !healed
                    || self
                        .checked
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&key)
                        .is_none_or(|t| t.elapsed() >= DRIFT_CHECK);
                if due {
                    if let Ok(Some(false)) = self.effects.exists(&spec).await {
                        self.event(
                            world,
                            "slice_drift",
                            &format!(
                                "{service}: {} slice {} was dropped outside binky; making it again (provision, migrate, seed)",
                                res.adapter, row.name
                            ),
                        );
                        row.address = None;
                        row.migrate_hash = None;
                        row.seed_hash = None;
                        row.state = "pending".into();
                        self.save(world, &row)?;
                        self.healed
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&key);
                    } else {
                        self.checked
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key.clone(), std::time::Instant::now());
                    }
                }
            }
            let migrate_due = res
                .migrate
                .as_deref()
                .is_some_and(|m| row.migrate_hash.as_deref() != Some(&hash(m)));
            let seed_due = res.seed.is_some() && row.seed_hash.is_none();
            if row.state == "ready"
                && row.adapter == res.adapter
                && !migrate_due
                && !seed_due
                && healed
            {
                ready.push(format!("{service}={}", row.name));
                continue;
            }
            let healed = healed && row.state != "pending";
            let fresh = row.address.is_none();
            // A new slice with `clone_from`: a server-side copy of the golden template,
            // when the adapter can; correctness never depends on it, only speed.
            if fresh && res.clone_from.is_some() {
                match self.clone_from_golden(world, service, res, &spec).await? {
                    CloneOutcome::Cloned(address) => {
                        row.adapter = res.adapter.clone();
                        row.address = Some(address.url.clone());
                        row.tokens = address.tokens.clone();
                        row.admin_url = address.admin_url.clone();
                        // The template ran them: the copy has their effect.
                        row.migrate_hash = res.migrate.as_deref().map(hash);
                        row.seed_hash = res.seed.as_deref().map(hash);
                        ready.push(self.mark_ready(world, &mut row, key)?);
                        continue;
                    }
                    CloneOutcome::Wait(why) => {
                        return Ok(Applied {
                            action: Action::AwaitChange,
                            conditions: vec![Condition::waiting(
                                CONDITION,
                                "Waiting",
                                format!("{service}: {why}"),
                            )],
                        })
                    }
                    CloneOutcome::Failed(why) => {
                        return Ok(Applied {
                            action: Action::AwaitChange,
                            conditions: vec![Condition::failed(
                                CONDITION,
                                "GoldenFailed",
                                format!("{service}: {why}"),
                            )],
                        })
                    }
                    CloneOutcome::Fallback => {}
                }
            }
            // Provisioned at this generation already (waiting for the worktree since):
            // reuse it instead of asking the server again.
            let reuse = (healed && row.state == "provisioned")
                .then(|| {
                    row.address.clone().map(|url| SliceAddress {
                        url,
                        tokens: row.tokens.clone(),
                        admin_url: row.admin_url.clone(),
                    })
                })
                .flatten();
            let provisioned = match reuse {
                Some(a) => Ok(a),
                None => self.effects.provision(&spec).await,
            };
            let address = match provisioned {
                Ok(a) => a,
                Err(SliceFault::Transient(detail)) => {
                    row.message = format!("waiting for its {} server: {detail}", res.adapter);
                    self.save(world, &row)?;
                    return Err(SliceError::Waiting {
                        service: service.clone(),
                        adapter: res.adapter.clone(),
                        detail,
                    });
                }
                Err(SliceFault::Permanent(detail)) => {
                    row.state = "failed".into();
                    row.failed_generation = Some(world.generation);
                    row.message = detail.clone();
                    self.save(world, &row)?;
                    self.event(world, "slice_failed", &format!("{service}: {detail}"));
                    return Ok(Applied {
                        action: Action::AwaitChange,
                        conditions: vec![Condition::failed(
                            CONDITION,
                            "SliceFailed",
                            format!("{service}: {detail}"),
                        )],
                    });
                }
            };
            row.adapter = res.adapter.clone();
            row.address = Some(address.url.clone());
            row.tokens = address.tokens.clone();
            row.admin_url = address.admin_url.clone();
            if fresh {
                self.event(
                    world,
                    "slice",
                    &format!("{service}: provisioned {} slice {}", res.adapter, row.name),
                );
            }
            if (migrate_due || seed_due) && layout.is_none() {
                row.state = "provisioned".into();
                row.message = "waiting for the worktree to run migrate and seed".into();
                self.save(world, &row)?;
                self.healed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, world.generation);
                return Ok(Applied {
                    action: Action::AwaitChange,
                    conditions: vec![Condition::waiting(
                        CONDITION,
                        "Waiting",
                        format!("{service}: waiting for the worktree to run migrate and seed"),
                    )],
                });
            }
            for (which, cmd, due) in [
                ("migrate", res.migrate.as_deref(), migrate_due),
                ("seed", res.seed.as_deref(), seed_due),
            ] {
                // A due command implies a worktree (checked above).
                let (Some(cmd), Some(layout)) = (cmd.filter(|_| due), layout.as_ref()) else {
                    continue;
                };
                row.state = if which == "migrate" {
                    "migrating".into()
                } else {
                    "seeding".into()
                };
                row.message = format!("running {which}");
                self.save(world, &row)?;
                if let Err(msg) = self
                    .run_command(world, layout, service, res, which, cmd, &address)
                    .await
                {
                    row.state = "failed".into();
                    row.failed_generation = Some(world.generation);
                    row.message = msg.clone();
                    self.save(world, &row)?;
                    self.event(
                        world,
                        &format!("{which}_failed"),
                        &format!("{service}: {msg}"),
                    );
                    return Ok(Applied {
                        action: Action::AwaitChange,
                        conditions: vec![Condition::failed(
                            CONDITION,
                            "SliceFailed",
                            format!("{service}: {msg}"),
                        )],
                    });
                }
                if which == "migrate" {
                    row.migrate_hash = Some(hash(cmd));
                } else {
                    row.seed_hash = Some(hash(cmd));
                }
            }
            ready.push(self.mark_ready(world, &mut row, key)?);
        }
        let down = servers_down(&servers, &rows, &wanted);
        if !down.is_empty() {
            return Ok(Applied {
                // The server watch nudges the world when the server is back.
                action: Action::Requeue(std::time::Duration::from_secs(5)),
                conditions: vec![Condition::waiting(CONDITION, "ServerDown", down.join("; "))],
            });
        }
        Ok(Applied {
            action: Action::AwaitChange,
            conditions: vec![Condition::ok(CONDITION, "Ready", ready.join(" "))],
        })
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, SliceError> {
        let fins = self.store.read(|c| store::finalizers(c, world.id))?;
        if fins.iter().any(|f| f == crate::process::NAME) {
            return Ok(Cleanup::Pending(Action::AwaitChange));
        }
        for row in self.store.read(|c| store::slices(c, world.id))? {
            let res = world
                .spec
                .services
                .get(&row.service)
                .and_then(|s| s.resource())
                .cloned();
            let mut spec = match &res {
                Some(r) => self.spec_of(world, &row.service, r, &row),
                None => SliceSpec {
                    adapter: row.adapter.clone(),
                    slice: row.name.clone(),
                    secret: row.secret.clone(),
                    admin_url: None,
                    options: BTreeMap::new(),
                    buckets: Vec::new(),
                    search_path: world.env.get("PATH").cloned(),
                },
            };
            spec.adapter = row.adapter.clone();
            // Drop it where it was made, even if binky.toml changed meanwhile.
            if row.admin_url.is_some() {
                spec.admin_url = row.admin_url.clone();
            }
            // Never made (its server's address came from an unset variable): nothing to drop.
            let never_made = row.address.is_none()
                && row.admin_url.is_none()
                && res
                    .as_ref()
                    .is_some_and(|r| unset_settings(world, r).is_some());
            if never_made {
                self.store.write(owner::Slice, |tx| {
                    tx.execute(
                        "DELETE FROM slices WHERE world_id = ?1 AND service = ?2",
                        params![world.id, row.service],
                    )?;
                    Ok(())
                })?;
                continue;
            }
            let dropped = match self.effects.teardown(&spec).await {
                Ok(()) => true,
                Err(SliceFault::Transient(detail)) => {
                    return Err(SliceError::Waiting {
                        service: row.service.clone(),
                        adapter: row.adapter.clone(),
                        detail,
                    })
                }
                Err(SliceFault::Permanent(detail)) => {
                    // Nothing binky can drop (an adapter that is gone): say so, do not hang.
                    self.event(
                        world,
                        "slice_failed",
                        &format!(
                            "{}: could not drop slice {}: {detail}",
                            row.service, row.name
                        ),
                    );
                    false
                }
            };
            self.store.write(owner::Slice, |tx| {
                tx.execute(
                    "DELETE FROM slices WHERE world_id = ?1 AND service = ?2",
                    params![world.id, row.service],
                )?;
                Ok(())
            })?;
            if dropped {
                self.event(
                    world,
                    "slice",
                    &format!(
                        "{}: dropped {} slice {}",
                        row.service, row.adapter, row.name
                    ),
                );
            }
        }
        Ok(Cleanup::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_names_are_safe_short_and_distinct() {
        let dashed = slice_name("acme", "login-fix", "db");
        assert!(
            dashed.starts_with("bk_acme_login_fix_db_")
                && dashed.len() == "bk_acme_login_fix_db_".len() + 8,
            "{dashed}"
        );
        assert_eq!(slice_name("acme", "login-fix", "db"), dashed);
        let a = slice_name("acme", "feat/x", "db");
        let b = slice_name("acme", "feat_x", "db");
        assert_ne!(a, b, "two worlds share a slice");
        assert_eq!(slice_name("acme", "w", "db"), "bk_acme_w_db");
        let long = slice_name(&"p".repeat(40), &"w".repeat(40), "db");
        assert!(long.len() <= 63, "{long}");
        for n in [a, b, long] {
            assert!(
                n.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
                "{n}"
            );
        }
    }

    #[test]
    fn secrets_are_random() {
        let a = random_secret();
        assert_eq!(a.len(), 36);
        assert_ne!(a, random_secret());
    }
}
