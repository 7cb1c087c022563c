//! What a service is started with: its command, workdir, environment and readiness probe
//! resolved from the world's tokens into the spawn spec handed to the supervisor.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::ProcessController;
use crate::env::{self, Layout, Snapshot, WorldCommand};
use crate::spec::{Probe, Service};
use crate::store::World;
use crate::supervisor::{ProbeTarget, Supervisor};
use crate::tokens::Tokens;

/// Everything a service needs to start, resolved.
pub(super) struct Resolved {
    pub(super) cmd: String,
    pub(super) workdir: PathBuf,
    pub(super) env: BTreeMap<String, String>,
    pub(super) hash: String,
    pub(super) missing_env_files: Vec<PathBuf>,
    /// `${env.…}` references in its cmd, setup, env or health that resolve to nothing.
    pub(super) unset_env: Vec<crate::tokens::UnsetEnv>,
    /// binky's other tokens there that resolve to nothing (yet: a slice not made), with
    /// the field each is in first (`env.DB_PORT`).
    pub(super) unresolved: Vec<(String, String)>,
    /// The tokens its text resolves against (its `env_file`s' variables included).
    pub(super) tokens: Tokens,
}

pub(super) fn hash_of<T: serde::Serialize>(value: &T) -> String {
    let json = serde_json::to_vec(value).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

impl<S: Supervisor> ProcessController<S> {
    pub(super) fn resolve(
        &self,
        world: &World,
        layout: &Layout,
        name: &str,
        svc: &Service,
        snap: &Snapshot,
        restarts: &BTreeMap<String, i64>,
    ) -> Option<Resolved> {
        let process = svc.process()?;
        let ca = self.config.ca_cert.as_deref();
        // One environment for the service's `cmd`, its `setup` and its health command
        // (`WorldCommand::Service` says why).
        let command = WorldCommand::Service(name);
        let ce = env::world_command_env(world, layout, snap, command, ca).ok()?;
        let t = &ce.tokens;
        let cmd = t.resolve(&process.cmd, name);
        // A changed health check, or a restart asked for this service alone (a watched file
        // changed), restarts it too; neither is part of the hash until it exists, so hashes
        // of existing processes stay what they were.
        let health = process
            .health
            .as_ref()
            .map(|h| format!("{:?}", h.probe))
            .map(|p| t.resolve(&p, name));
        // Restarts are asked per service (a watched file, `reload --group`): every replica.
        let nonce = restarts
            .get(crate::replica::service_of(name))
            .copied()
            .unwrap_or(0);
        let mut unset_env: Vec<crate::tokens::UnsetEnv> = Vec::new();
        let mut unresolved: Vec<(String, String)> = Vec::new();
        for (field, text) in process.token_fields() {
            for u in t.unset_env(text) {
                if !unset_env.iter().any(|x| x.name == u.name) {
                    unset_env.push(u);
                }
            }
            for token in t.unresolved(text, name) {
                if !unresolved.iter().any(|(_, x)| *x == token) {
                    unresolved.push((field.clone(), token));
                }
            }
        }
        // `PWD` follows the workdir, which the hash has, and the mark the world: left out,
        // so that a daemon that started setting them restarts nothing.
        let hashed: BTreeMap<&String, &String> = ce
            .vars
            .iter()
            .filter(|(k, _)| *k != "PWD" && *k != env::SPAWNED_IN)
            .collect();
        let workdir = &ce.dir;
        let hash = match (health, nonce) {
            (None, 0) => hash_of(&(&cmd, workdir, &hashed)),
            (health, nonce) => hash_of(&(&cmd, workdir, &hashed, health, nonce)),
        };
        Some(Resolved {
            cmd,
            workdir: ce.dir,
            env: ce.vars,
            hash,
            missing_env_files: ce.missing_env_files,
            unset_env,
            unresolved,
            tokens: ce.tokens,
        })
    }

    pub(super) fn probe_target(
        &self,
        world: &World,
        name: &str,
        svc: &Service,
        tokens: &Tokens,
        resolved: &Resolved,
    ) -> Option<ProbeTarget> {
        let process = svc.process()?;
        let mut t = tokens.clone();
        for (k, v) in &resolved.env {
            t.env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        match &process.health {
            None => tokens
                .primary_port(name)
                .map(|p| ProbeTarget::Tcp("127.0.0.1".into(), p)),
            Some(h) => Some(match &h.probe {
                Probe::Http(url) => {
                    let url = t.resolve(url, name);
                    if url.starts_with('/') {
                        let port = tokens.primary_port(name).unwrap_or(80);
                        ProbeTarget::Http(format!("http://127.0.0.1:{port}{url}"))
                    } else {
                        ProbeTarget::Http(url)
                    }
                }
                Probe::Tcp(spec) => {
                    let spec = t.resolve(spec, name);
                    match crate::url::host_port(&spec) {
                        Some((host, Some(port))) => ProbeTarget::Tcp(
                            if host.is_empty() {
                                "127.0.0.1".into()
                            } else {
                                host.to_owned()
                            },
                            port.parse().unwrap_or(0),
                        ),
                        _ => ProbeTarget::Tcp("127.0.0.1".into(), spec.trim().parse().unwrap_or(0)),
                    }
                }
                // The service's own environment (`WorldCommand::Service` says why).
                Probe::Cmd(cmd) => ProbeTarget::Cmd {
                    cmd: t.resolve(cmd, name),
                    workdir: resolved.workdir.clone(),
                    env: resolved.env.clone(),
                    world: world.id,
                    service: name.to_owned(),
                },
            }),
        }
    }
}
