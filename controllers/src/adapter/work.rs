//! The work the slice and golden controllers share: the spec of a slice for a world, and
//! running `migrate` or `seed` against a slice. One value, held by both controllers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{SliceAddress, SliceEffects, SliceSpec};
use crate::env::{self, Layout, Snapshot, WorldCommand};
use crate::needs::Need;
use crate::spec::Resource;
use crate::store::{Store, World};
use crate::supervisor::{SpawnSpec, Supervisor};

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

/// Adapters, the supervisor that runs `migrate` and `seed`, and where their output goes.
pub struct SliceWork<E, S> {
    store: Store,
    effects: E,
    sup: Arc<S>,
    logs_dir: PathBuf,
    command_timeout: Duration,
    /// binky's CA, for Node clients' `NODE_EXTRA_CA_CERTS` (as services get it).
    ca: Option<PathBuf>,
}

impl<E: SliceEffects, S: Supervisor> SliceWork<E, S> {
    /// Work over `store`, making slices with `effects`, running `migrate`/`seed` with `sup`,
    /// logging to `logs_dir`.
    pub fn new(store: Store, effects: E, sup: Arc<S>, logs_dir: PathBuf) -> Self {
        SliceWork {
            store,
            effects,
            sup,
            logs_dir,
            command_timeout: Duration::from_secs(30 * 60),
            ca: None,
        }
    }

    /// Give `migrate` and `seed` binky's CA as services get it.
    pub fn with_ca(mut self, ca: Option<PathBuf>) -> Self {
        self.ca = ca;
        self
    }

    /// The adapter effects.
    pub(crate) fn effects(&self) -> &E {
        &self.effects
    }

    fn event(&self, world: &World, kind: &str, msg: &str) {
        if let Err(err) = self.store.event(world.id, kind, msg) {
            tracing::warn!(%err, "cannot record event");
        }
    }

    /// The spec of the slice `name` (with its password `secret`) of `world`'s `service`.
    pub(crate) fn spec_of(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        name: &str,
        secret: &str,
    ) -> SliceSpec {
        slice_spec(world, service, res, name, secret)
    }

    /// The slices of other services that `service`'s `migrate` and `seed` need and that
    /// are not made yet (`REDIS_URL = "${cache.url}"` for Django's settings, before the
    /// cache's slice exists): the commands wait for them, outside any reconcile.
    pub(crate) fn unmade_needs(
        &self,
        world: &World,
        service: &str,
    ) -> Result<Vec<Need>, crate::store::StoreError> {
        let selected = world.spec.selected(world.group.as_deref());
        let makes = |n: &str| selected.contains(n);
        let needs = crate::needs::slice_needs(&world.spec, service, &makes);
        if needs.is_empty() {
            return Ok(needs);
        }
        let snap = Snapshot::read(&self.store, world)?;
        Ok(needs
            .into_iter()
            .filter(|n| !snap.tokens.urls.contains_key(&n.target))
            .collect())
    }

    /// What `migrate` or `seed` of `service` resolve against: the world's, with the
    /// slice being built (a golden template's is no world's row yet). A token naming
    /// another adapter service whose slice is not made yet is [`CommandError::Waits`]
    /// (never waited for here: a reconcile that waits holds its world, `binky remove`
    /// included); one that can never resolve is the failure.
    fn command_snapshot(
        &self,
        world: &World,
        service: &str,
        res: &Resource,
        which: &str,
        cmd: &str,
        address: &SliceAddress,
    ) -> Result<Snapshot, CommandError> {
        let snap = Snapshot::read(&self.store, world)
            .map_err(|e| CommandError::Failed(e.to_string()))?
            .with_slice(service, &address.url, &address.tokens);
        let tokens = &snap.tokens;
        let fields = std::iter::once((which.to_owned(), cmd)).chain(
            res.env
                .iter()
                .map(|(k, v)| (format!("env.{k}"), v.as_str())),
        );
        let mut unmade = None;
        for (field, text) in fields {
            for token in tokens.unresolved(text, service) {
                let target = token
                    .trim_start_matches("${")
                    .split('.')
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let other_slice = target != service
                    && target != "self"
                    && world.spec.resource(&target).is_some()
                    && !tokens.urls.contains_key(&target)
                    && world
                        .spec
                        .selected(world.group.as_deref())
                        .contains(&target);
                if !other_slice {
                    return Err(CommandError::Failed(format!(
                        "{field} of `{service}` uses {token}, which resolves to nothing: {}; fix binky.toml and run `binky up {}` again",
                        tokens.explain(&token, service),
                        world.name
                    )));
                }
                unmade.get_or_insert((field.clone(), token, target));
            }
        }
        match unmade {
            None => Ok(snap),
            Some((field, token, target)) => Err(CommandError::Waits(format!(
                "{field} of `{service}` uses {token}: waiting for the slice of `{target}`"
            ))),
        }
    }

    /// Run `migrate` or `seed` against the slice.
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
    ) -> Result<(), CommandError> {
        let snap = self.command_snapshot(world, service, res, which, cmd, address)?;
        let command = WorldCommand::Slice(service);
        let ce = env::world_command_env(world, layout, &snap, command, self.ca.as_deref())
            .map_err(|e| CommandError::Failed(e.to_string()))?;
        let log = crate::supervisor::log_path(&self.logs_dir, world, service);
        let spec = SpawnSpec {
            world: world.id,
            service: command.name(),
            cmd: ce.tokens.resolve(cmd, service),
            workdir: ce.dir,
            env: ce.vars,
            log: log.clone(),
            token: self.sup.token(world.id),
            task: true,
            nice: crate::settings::nice(&self.store),
            limits: Default::default(),
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
                Err(CommandError::Failed(format!(
                    "{which} `{}` failed ({why}); fix it and run `binky up {}` again. Last output:\n{}",
                    spec.cmd,
                    world.name,
                    crate::supervisor::log_tail(&log, 10)
                )))
            }
        }
    }
}

/// Why `migrate` or `seed` did not run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CommandError {
    /// Not yet: a slice it names is not made (the message says which); it runs once it is.
    Waits(String),
    /// It failed, or can never run: the message to show, with its output.
    Failed(String),
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Waits(m) | CommandError::Failed(m) => f.write_str(m),
        }
    }
}

/// The spec of the slice `name` (with its password `secret`) of `world`'s `service`.
pub(crate) fn slice_spec(
    world: &World,
    service: &str,
    res: &Resource,
    name: &str,
    secret: &str,
) -> SliceSpec {
    // Adapter settings see the environment of `binky up` (`${env.X}`), nothing else.
    let t = crate::tokens::Tokens {
        world: world.name.clone(),
        env: world.env.clone(),
        ..Default::default()
    };
    SliceSpec {
        adapter: res.adapter.clone(),
        slice: name.to_owned(),
        secret: secret.to_owned(),
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
