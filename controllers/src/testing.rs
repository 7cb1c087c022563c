//! Fakes of the effect traits, and a harness that converges a world through the real
//! runtime functions against a real SQLite file.

#![allow(dead_code, missing_docs)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::adapter::{SliceAddress, SliceEffects, SliceFault, SliceSpec, Teardown};
use crate::port::PortProbe;
use crate::process::Mechanism;
use crate::runtime::{reconcile_one, Controller, KeyBackoff, Trigger};
use crate::spec::{
    Agents, Hooks, Process, Project, Resource, Restart, Service, ServiceKind, Spec, UrlSpec,
};
use crate::store::{NewWorld, Store, World, WorldId};
use crate::supervisor::{
    Exit, Liveness, Marked, Placement, ProbeFailure, ProbeTarget, ProcId, SpawnError, SpawnSpec,
    Supervisor, Usage,
};
use crate::worktree::{Git, GitError, WorktreeInfo};

/// A process service with a URL (so it gets a port).
pub fn web(cmd: &str, deps: &[&str]) -> Service {
    Service {
        depends_on: deps.iter().map(|s| s.to_string()).collect(),
        shared: false,
        kind: ServiceKind::Process(Process {
            cmd: cmd.into(),
            setup: None,
            workdir: ".".into(),
            restart: Restart::OnFailure,
            limits: None,
            url: Some(UrlSpec::Service),
            ports: None,
            health: None,
            watch: vec![],
            env: BTreeMap::new(),
            env_file: vec![],
            replicas: 1,
            stop: Default::default(),
        }),
    }
}

/// An adapter service (a slice of a shared server) with these `migrate` and `seed`.
pub fn resource(adapter: &str, migrate: Option<&str>, seed: Option<&str>) -> Service {
    Service {
        depends_on: vec![],
        shared: false,
        kind: ServiceKind::Resource(Resource {
            adapter: adapter.into(),
            admin_url: None,
            migrate: migrate.map(Into::into),
            seed: seed.map(Into::into),
            clone_from: None,
            clone_key_files: None,
            sync: Default::default(),
            buckets: vec![],
            options: BTreeMap::new(),
            workdir: ".".into(),
            env: BTreeMap::new(),
            env_file: vec![],
        }),
    }
}

/// The same adapter service, cloned from the golden template `template`.
pub fn cloned_from(mut svc: Service, template: &str) -> Service {
    if let ServiceKind::Resource(r) = &mut svc.kind {
        r.clone_from = Some(template.into());
    }
    svc
}

/// A spec of these services.
pub fn spec(services: Vec<(&str, Service)>) -> Spec {
    Spec {
        project: Project {
            name: "acme".into(),
            domain: None,
            port_range: Some((5000, 5009)),
            https: false,
            copy: Vec::new(),
            copy_modes: Default::default(),
        },
        services: services
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s))
            .collect(),
        groups: BTreeMap::new(),
        agents: Agents::default(),
        hooks: Hooks::default(),
        order: vec![],
    }
}

/// A new world of `spec` in repo `/repo` (worktree under the temp dir).
pub fn new_world(dir: &Path, name: &str, spec: Spec) -> NewWorld {
    NewWorld {
        project: spec.project.name.clone(),
        repo_root: dir.join("repo"),
        name: name.into(),
        branch: name.into(),
        from_ref: Some("base".into()),
        worktree_path: dir.join("wt").join(name),
        config_rel: String::new(),
        config_path: dir.join("repo/binky.toml"),
        spec,
        env: BTreeMap::new(),
        group: None,
        wait: None,
        made_by: None,
    }
}

/// Fake git over real directories (so "the path exists" checks hold).
#[derive(Default)]
pub struct FakeGit {
    pub inner: Mutex<GitState>,
}

#[derive(Default)]
pub struct GitState {
    pub worktrees: Vec<WorktreeInfo>,
    pub branches: BTreeMap<String, u64>,
    pub dirty: BTreeSet<PathBuf>,
    pub calls: Vec<String>,
    /// The worktrees a bootstrap was planned for (not git: not in `calls`).
    pub bootstraps: Vec<PathBuf>,
    /// What a plan gives every new worktree (paths relative to it, with their modes).
    pub plan: Vec<(String, crate::spec::CopyMode)>,
    /// `(worktree name, path, gate)`: bringing that path into that worktree waits for the
    /// gate's notification (to look at what happens meanwhile).
    pub bring_gate: Option<(String, String, Arc<tokio::sync::Notify>)>,
    /// `(worktree, path)` brought, in order.
    pub brought: Vec<(PathBuf, String)>,
    /// What looking for linked files written in place finds, by worktree.
    pub changed_links: BTreeMap<PathBuf, Vec<crate::inplace::Changed>>,
    /// `(worktree, paths with their times)` looked at for linked files written in place.
    pub looked: Vec<(PathBuf, Vec<(String, i64)>)>,
}

impl Git for FakeGit {
    async fn worktrees(&self, _repo: &Path) -> Result<Vec<WorktreeInfo>, GitError> {
        Ok(self.inner.lock().unwrap().worktrees.clone())
    }
    async fn branch_exists(&self, _repo: &Path, branch: &str) -> Result<bool, GitError> {
        Ok(self.inner.lock().unwrap().branches.contains_key(branch))
    }
    async fn rev_parse(&self, _repo: &Path, rev: &str) -> Result<String, GitError> {
        Ok(format!("sha-of-{rev}"))
    }
    async fn add_worktree(
        &self,
        _repo: &Path,
        path: &Path,
        branch: &str,
        from: Option<&str>,
    ) -> Result<(), GitError> {
        let mut g = self.inner.lock().unwrap();
        g.calls.push(format!("add {branch} from {from:?}"));
        std::fs::create_dir_all(path).unwrap();
        g.branches.entry(branch.into()).or_insert(0);
        g.worktrees.push(WorktreeInfo {
            path: path.to_owned(),
            branch: Some(branch.into()),
        });
        Ok(())
    }
    async fn plan_bootstrap(
        &self,
        repo: &Path,
        worktree: &Path,
        _copy: &[String],
        _modes: &BTreeMap<String, crate::spec::CopyMode>,
        _fallbacks: &[PathBuf],
    ) -> Result<Vec<crate::worktree::Planned>, String> {
        let mut g = self.inner.lock().unwrap();
        g.bootstraps.push(worktree.to_owned());
        Ok(g.plan
            .iter()
            .filter(|(p, _)| !worktree.join(p).exists())
            .map(|(p, mode)| crate::worktree::Planned {
                path: p.clone(),
                from: repo.to_owned(),
                mode: *mode,
            })
            .collect())
    }
    async fn bring(
        &self,
        planned: &crate::worktree::Planned,
        worktree: &Path,
    ) -> Result<crate::worktree::Copied, String> {
        let gate = {
            let g = self.inner.lock().unwrap();
            g.bring_gate.clone().filter(|(name, path, _)| {
                worktree.file_name().is_some_and(|n| n == name.as_str()) && *path == planned.path
            })
        };
        if let Some((_, _, gate)) = gate {
            gate.notified().await;
        }
        std::fs::create_dir_all(worktree.join(&planned.path)).map_err(|e| e.to_string())?;
        self.inner
            .lock()
            .unwrap()
            .brought
            .push((worktree.to_owned(), planned.path.clone()));
        Ok(crate::worktree::Copied {
            path: planned.path.clone(),
            from: planned.from.clone(),
            files: 1,
            bytes: 1,
            how: match planned.mode {
                crate::spec::CopyMode::Link => crate::worktree::CopyHow::Linked,
                crate::spec::CopyMode::Copy => crate::worktree::CopyHow::Copied,
            },
            copied: 0,
            note: None,
            took: Duration::ZERO,
        })
    }
    async fn changed_links(
        &self,
        worktree: &Path,
        paths: &[(String, i64)],
        _checkouts: &[PathBuf],
    ) -> Result<Vec<crate::inplace::Changed>, String> {
        let mut g = self.inner.lock().unwrap();
        g.looked.push((worktree.to_owned(), paths.to_vec()));
        Ok(g.changed_links.get(worktree).cloned().unwrap_or_default())
    }
    async fn changes(&self, wt: &Path) -> Result<Vec<String>, GitError> {
        Ok(if self.inner.lock().unwrap().dirty.contains(wt) {
            vec!["changed.txt".into()]
        } else {
            Vec::new()
        })
    }
    async fn remove_worktree(&self, _repo: &Path, path: &Path) -> Result<(), GitError> {
        let mut g = self.inner.lock().unwrap();
        g.calls.push(format!("remove {}", path.display()));
        g.worktrees.retain(|w| w.path != path);
        let _ = std::fs::remove_dir_all(path);
        Ok(())
    }
    async fn prune(&self, _repo: &Path) -> Result<(), GitError> {
        Ok(())
    }
    async fn commits_ahead(
        &self,
        _repo: &Path,
        _base: &str,
        branch: &str,
    ) -> Result<u64, GitError> {
        Ok(*self
            .inner
            .lock()
            .unwrap()
            .branches
            .get(branch)
            .unwrap_or(&0))
    }
    async fn delete_branch(&self, _repo: &Path, branch: &str) -> Result<(), GitError> {
        let mut g = self.inner.lock().unwrap();
        g.calls.push(format!("delete-branch {branch}"));
        g.branches.remove(branch);
        Ok(())
    }
}

/// Ports that a "foreign process" holds.
#[derive(Default, Clone)]
pub struct FakePorts {
    pub busy: Arc<Mutex<BTreeSet<u16>>>,
    pub probed: Arc<Mutex<Vec<u16>>>,
}

impl PortProbe for FakePorts {
    fn is_free(&self, port: u16) -> bool {
        self.probed.lock().unwrap().push(port);
        !self.busy.lock().unwrap().contains(&port)
    }
}

/// A fake process.
#[derive(Clone, Debug)]
pub struct FakeProc {
    pub spec: SpawnSpec,
    pub exit: Option<Exit>,
}

/// A supervisor that records everything and lets tests decide what happens.
#[derive(Default)]
pub struct FakeSupervisor {
    pub inner: Mutex<SupState>,
}

#[derive(Default)]
pub struct SupState {
    pub next_pid: u32,
    pub procs: HashMap<ProcId, FakeProc>,
    pub spawned: Vec<(String, ProcId)>,
    pub stopped: Vec<String>,
    /// Each stop as it happened: `signal NAME` when it is asked (with how, in `stop_hows`),
    /// `gone NAME` when it has stopped; other stops run meanwhile.
    pub stop_log: Vec<String>,
    /// How each stop was asked for, by service.
    pub stop_hows: Vec<(String, crate::supervisor::StopHow)>,
    /// Services whose probe fails.
    pub unready: BTreeSet<String>,
    /// Services that listen on these ports instead of their own (their probe says so).
    pub elsewhere: HashMap<String, Vec<u16>>,
    /// What [`Supervisor::saturated`] says.
    pub saturated: Option<String>,
    /// Processes carrying this home's token (for the orphan sweep).
    pub marked: Vec<Marked>,
    pub killed_groups: Vec<u32>,
    /// `run` calls (setup, hooks) and the exit code they get.
    pub runs: Vec<SpawnSpec>,
    pub run_code: i32,
    /// Command text → how many of its next runs exit 3 (then it runs as `run_code` says).
    pub fail_next: BTreeMap<String, u32>,
    /// Tasks (setup) keep running until a test ends them.
    pub hold_tasks: bool,
    /// What enforces limits (placements say it), and why not when nothing does.
    pub mechanism: Mechanism,
    pub note: String,
    /// What each service's cgroup (`fake:<world>/<service>`) holds.
    pub usage: HashMap<String, Usage>,
    /// Cgroups released, and worlds whose cgroups were released.
    pub released: Vec<String>,
    pub released_worlds: Vec<WorldId>,
}

impl SupState {
    /// The cgroup the fake puts a service of `world` in.
    pub fn cgroup(world: WorldId, service: &str) -> String {
        format!("fake:{world}/{service}")
    }
}

impl FakeSupervisor {
    /// Make a running service exit.
    pub fn exit(&self, service: &str, code: i32) {
        let mut s = self.inner.lock().unwrap();
        for p in s.procs.values_mut() {
            if p.spec.service == service && p.exit.is_none() {
                p.exit = Some(Exit {
                    code: Some(code),
                    signal: None,
                });
            }
        }
    }

    /// Make a running service die by `signal`.
    pub fn kill(&self, service: &str, signal: i32) {
        let mut s = self.inner.lock().unwrap();
        for p in s.procs.values_mut() {
            if p.spec.service == service && p.exit.is_none() {
                p.exit = Some(Exit {
                    code: None,
                    signal: Some(signal),
                });
            }
        }
    }

    /// Live process of a service.
    pub fn live(&self, service: &str) -> Vec<ProcId> {
        let s = self.inner.lock().unwrap();
        s.procs
            .iter()
            .filter(|(_, p)| p.spec.service == service && p.exit.is_none())
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn spawn_order(&self) -> Vec<String> {
        self.inner
            .lock()
            .unwrap()
            .spawned
            .iter()
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn service_on_port(&self, port: u16) -> Option<String> {
        let s = self.inner.lock().unwrap();
        s.procs
            .values()
            .find(|p| {
                p.exit.is_none()
                    && p.spec.env.get("PORT").map(String::as_str) == Some(&port.to_string())
            })
            .map(|p| p.spec.service.clone())
    }
}

impl Supervisor for FakeSupervisor {
    async fn spawn(&self, spec: &SpawnSpec) -> Result<ProcId, SpawnError> {
        let mut s = self.inner.lock().unwrap();
        s.next_pid += 1;
        let id = ProcId {
            pid: 1000 + s.next_pid,
            start_time: 77,
        };
        // A task (setup) is recorded with the `run`s and ends at once with `run_code`,
        // unless the test holds tasks running.
        let exit = (spec.task && !s.hold_tasks).then_some(Exit {
            code: Some(s.run_code),
            signal: None,
        });
        if spec.task {
            s.runs.push(spec.clone());
        }
        s.procs.insert(
            id,
            FakeProc {
                spec: spec.clone(),
                exit,
            },
        );
        if !spec.task {
            s.spawned.push((spec.service.clone(), id));
        }
        Ok(id)
    }

    fn liveness(&self, _world: WorldId, id: ProcId) -> Liveness {
        let s = self.inner.lock().unwrap();
        match s.procs.get(&id) {
            Some(FakeProc { exit: None, .. }) => Liveness::Running,
            Some(FakeProc { exit: Some(e), .. }) => Liveness::Exited(*e),
            None => Liveness::Exited(Exit {
                code: None,
                signal: None,
            }),
        }
    }

    async fn stop(
        &self,
        id: ProcId,
        how: crate::supervisor::StopHow,
    ) -> crate::supervisor::Stopped {
        let name = {
            let mut s = self.inner.lock().unwrap();
            let name = s.procs.get(&id).map(|p| p.spec.service.clone());
            if let Some(n) = &name {
                s.stop_log.push(format!("signal {n}"));
                s.stop_hows.push((n.clone(), how));
            }
            name
        };
        // The process takes a moment to go: other stops started meanwhile run beside it.
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        let mut s = self.inner.lock().unwrap();
        if let Some(p) = s.procs.get_mut(&id) {
            if p.exit.is_none() {
                p.exit = Some(Exit {
                    code: None,
                    signal: Some(15),
                });
            }
        }
        if let Some(n) = name {
            s.stop_log.push(format!("gone {n}"));
            s.stopped.push(n);
        }
        crate::supervisor::Stopped::Exited(Duration::ZERO)
    }

    fn saturated(&self, _cpu_percent: f64) -> Option<String> {
        self.inner.lock().unwrap().saturated.clone()
    }

    async fn probe(
        &self,
        target: &ProbeTarget,
        owner: ProcId,
        _timeout: Duration,
    ) -> Result<(), ProbeFailure> {
        let ProbeTarget::Tcp(_, port) = target else {
            return Ok(());
        };
        {
            let s = self.inner.lock().unwrap();
            let service = s.procs.get(&owner).map(|p| p.spec.service.clone());
            if let Some(listening) = service.and_then(|n| s.elsewhere.get(&n)) {
                return Err(ProbeFailure::OtherPort {
                    port: *port,
                    listening: listening.clone(),
                });
            }
        }
        match self.service_on_port(*port) {
            Some(svc) if !self.inner.lock().unwrap().unready.contains(&svc) => Ok(()),
            _ => Err(ProbeFailure::NotReady("connection refused".into())),
        }
    }

    async fn run(&self, spec: &SpawnSpec, _timeout: Duration) -> Result<Exit, SpawnError> {
        let mut s = self.inner.lock().unwrap();
        s.runs.push(spec.clone());
        let code = match s.fail_next.get_mut(&spec.cmd).filter(|n| **n > 0) {
            Some(n) => {
                *n -= 1;
                3
            }
            None => s.run_code,
        };
        Ok(Exit {
            code: Some(code),
            signal: None,
        })
    }

    fn marked(&self) -> Vec<Marked> {
        self.inner.lock().unwrap().marked.clone()
    }

    async fn kill_group(&self, pgid: u32, _grace: Duration) {
        self.inner.lock().unwrap().killed_groups.push(pgid);
    }

    fn token(&self, world: WorldId) -> String {
        format!("tag.{world}.x")
    }

    fn placement(&self, id: ProcId) -> Placement {
        let s = self.inner.lock().unwrap();
        let p = &s.procs[&id].spec;
        Placement {
            cgroup: Some(SupState::cgroup(p.world, &p.service)),
            mechanism: s.mechanism,
            note: s.note.clone(),
        }
    }

    fn usage(&self, cgroup: Option<&str>, _id: Option<ProcId>) -> Option<Usage> {
        self.inner.lock().unwrap().usage.get(cgroup?).copied()
    }

    fn release(&self, cgroup: &str) -> bool {
        let mut s = self.inner.lock().unwrap();
        s.released.push(cgroup.to_owned());
        s.usage.remove(cgroup);
        true
    }

    fn release_world(&self, world: WorldId, _recorded: &[String]) {
        self.inner.lock().unwrap().released_worlds.push(world);
    }
}

/// Reconcile `world` with `controller` once, the way the runtime does.
pub async fn reconcile<C: Controller>(c: &C, store: &Store, id: WorldId) {
    let mut b = KeyBackoff::default();
    let _ = reconcile_one(c, store, &Trigger::default(), &mut b, id).await;
}

/// Load a world.
pub fn world(store: &Store, id: WorldId) -> Option<World> {
    store.read(|c| crate::store::world(c, id)).unwrap()
}

/// A machine with fixed free memory and disk.
pub struct FakeMachine {
    /// Percent of memory available.
    pub mem: f64,
    /// GiB free.
    pub disk: f64,
}

impl Default for FakeMachine {
    fn default() -> Self {
        FakeMachine {
            mem: 80.0,
            disk: 100.0,
        }
    }
}

impl crate::machine::Machine for FakeMachine {
    fn mem_available_percent(&self) -> Option<f64> {
        Some(self.mem)
    }
    fn disk_free_gib(&self, _: &std::path::Path) -> Option<f64> {
        Some(self.disk)
    }
}

/// A disk whose free space a test sets, read by what measures it (each path asked for is
/// recorded); after `reading_fills`, it is `after` from then on (a drop freed enough).
#[derive(Default)]
pub struct FakeDisk {
    pub inner: Mutex<DiskState>,
}

#[derive(Default)]
pub struct DiskState {
    /// GiB free now.
    pub free: f64,
    /// This many more readings, then `free` becomes `after`.
    pub readings_left: Option<u32>,
    pub after: f64,
    /// Every path measured.
    pub asked: Vec<std::path::PathBuf>,
}

impl crate::machine::Machine for FakeDisk {
    fn mem_available_percent(&self) -> Option<f64> {
        Some(80.0)
    }
    fn disk_free_gib(&self, path: &std::path::Path) -> Option<f64> {
        let mut d = self.inner.lock().unwrap();
        d.asked.push(path.to_path_buf());
        let free = d.free;
        if let Some(n) = d.readings_left.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                d.free = d.after;
                d.readings_left = None;
            }
        }
        Some(free)
    }
}

/// Slices on a fake shared server: records every call, fails where a test says so.
/// Clones share one state, so a test keeps a handle on what its controllers do.
#[derive(Clone, Default)]
pub struct FakeSlices {
    pub inner: Arc<Mutex<SliceState>>,
}

#[derive(Default)]
pub struct SliceState {
    /// Every call: `provision NAME`, `teardown NAME`, `clone FROM -> TO`, `seal NAME`,
    /// `exists NAME`, `can_clone ADAPTER`, `pause NAME`.
    pub calls: Vec<String>,
    /// The slices on the server.
    pub slices: BTreeSet<String>,
    /// This many provisions fail transiently (the server is down) before one succeeds.
    pub provision_transient: u32,
    /// Every provision fails for good with this.
    pub provision_permanent: Option<String>,
    /// The adapter can copy a slice server-side.
    pub can_clone: bool,
    /// This many clones fail transiently before one succeeds.
    pub clone_transient: u32,
    /// Every clone fails for good with this.
    pub clone_permanent: Option<String>,
    /// Only clones into slices whose names start with this fail (`bk_acme_`: a world's,
    /// not a template's own stage copied into it); none: every clone may.
    pub clone_fails_into: Option<String>,
    /// Slice name → transient teardown failures left.
    pub teardown_transient: BTreeMap<String, u32>,
    /// Every teardown fails for good with this.
    pub teardown_permanent: Option<String>,
    /// Slice name → the other binky home the server says made it: its teardown leaves it.
    pub others: BTreeMap<String, String>,
    /// `exists` says `None` (the adapter cannot tell).
    pub blind: bool,
    /// Every slice runs a server of its own (`pause` stops it).
    pub own_servers: bool,
    /// Admin URL → why the server there did not answer when the daemon last asked it.
    pub unanswered: BTreeMap<String, String>,
}

impl FakeSlices {
    /// Calls of one kind (`provision`, `exists`, …), by the name they were for.
    pub fn calls(&self, kind: &str) -> Vec<String> {
        let prefix = format!("{kind} ");
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter_map(|c| c.strip_prefix(&prefix).map(str::to_owned))
            .collect()
    }

    /// Someone drops a slice behind binky's back.
    pub fn drop_outside(&self, name: &str) {
        assert!(
            self.inner.lock().unwrap().slices.remove(name),
            "no slice {name}"
        );
    }

    /// The slices on the server.
    pub fn on_server(&self) -> BTreeSet<String> {
        self.inner.lock().unwrap().slices.clone()
    }

    fn record(&self, call: String) -> std::sync::MutexGuard<'_, SliceState> {
        let mut s = self.inner.lock().unwrap();
        s.calls.push(call);
        s
    }
}

fn address(spec: &SliceSpec) -> SliceAddress {
    SliceAddress {
        url: format!(
            "fake://{}:{}@server/{}",
            spec.slice, spec.secret, spec.slice
        ),
        tokens: BTreeMap::new(),
        admin_url: spec.admin_url.clone(),
    }
}

impl SliceEffects for FakeSlices {
    async fn provision(&self, spec: &SliceSpec) -> Result<SliceAddress, SliceFault> {
        let mut s = self.record(format!("provision {}", spec.slice));
        if let Some(why) = &s.provision_permanent {
            return Err(SliceFault::Permanent(why.clone().into()));
        }
        if s.provision_transient > 0 {
            s.provision_transient -= 1;
            return Err(SliceFault::Transient(
                "cannot connect to 127.0.0.1:5999: connection refused".into(),
            ));
        }
        s.slices.insert(spec.slice.clone());
        Ok(address(spec))
    }

    async fn teardown(&self, spec: &SliceSpec) -> Result<Teardown, SliceFault> {
        let mut s = self.record(format!("teardown {}", spec.slice));
        if let Some(why) = &s.teardown_permanent {
            return Err(SliceFault::Permanent(why.clone().into()));
        }
        if let Some(home) = s.others.get(&spec.slice) {
            return Ok(Teardown::OtherHome(home.clone()));
        }
        if let Some(left) = s
            .teardown_transient
            .get_mut(&spec.slice)
            .filter(|n| **n > 0)
        {
            *left -= 1;
            return Err(SliceFault::Transient("server went away".into()));
        }
        s.slices.remove(&spec.slice);
        Ok(Teardown::Dropped)
    }

    async fn can_clone(&self, spec: &SliceSpec) -> Result<bool, SliceFault> {
        Ok(self.record(format!("can_clone {}", spec.adapter)).can_clone)
    }

    async fn pause(&self, spec: &SliceSpec) -> Result<bool, SliceFault> {
        Ok(self.record(format!("pause {}", spec.slice)).own_servers)
    }

    async fn clone_into(
        &self,
        from: &SliceSpec,
        to: &SliceSpec,
    ) -> Result<SliceAddress, SliceFault> {
        let mut s = self.record(format!("clone {} -> {}", from.slice, to.slice));
        let may_fail = s
            .clone_fails_into
            .as_ref()
            .is_none_or(|p| to.slice.starts_with(p.as_str()));
        if let Some(why) = s.clone_permanent.as_ref().filter(|_| may_fail) {
            return Err(SliceFault::Permanent(why.clone().into()));
        }
        if s.clone_transient > 0 && may_fail {
            s.clone_transient -= 1;
            return Err(SliceFault::Transient("template is busy".into()));
        }
        assert!(
            s.slices.contains(&from.slice),
            "cloned from a missing template {}",
            from.slice
        );
        s.slices.insert(to.slice.clone());
        Ok(address(to))
    }

    async fn seal(&self, template: &SliceSpec) -> Result<(), SliceFault> {
        drop(self.record(format!("seal {}", template.slice)));
        Ok(())
    }

    fn unanswered(&self, admin_url: &str) -> Option<String> {
        self.inner
            .lock()
            .unwrap()
            .unanswered
            .get(admin_url)
            .cloned()
    }

    async fn exists(&self, spec: &SliceSpec) -> Result<Option<bool>, SliceFault> {
        let s = self.record(format!("exists {}", spec.slice));
        Ok((!s.blind).then(|| s.slices.contains(&spec.slice)))
    }
}

/// A world's events, as `(kind, message)`.
pub fn events(store: &Store, world: &str) -> Vec<(String, String)> {
    store
        .read(|c| crate::store::events(c, "acme", world, 0, 500))
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.message))
        .collect()
}

/// A world's condition of type `type_`.
pub fn condition(store: &Store, id: WorldId, type_: &str) -> crate::store::ConditionRow {
    store
        .read(|c| crate::store::conditions(c, id))
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"))
}

/// The route tables the route controller published, newest last.
#[derive(Clone, Default)]
pub struct FakeRoutes {
    pub published: Arc<Mutex<Vec<Arc<crate::route::RouteTable>>>>,
}

impl FakeRoutes {
    /// The route of `host` in the newest table.
    pub fn route(&self, host: &str) -> Option<crate::route::Route> {
        self.published
            .lock()
            .unwrap()
            .last()
            .and_then(|t| t.routes.get(host).cloned())
    }
}

impl crate::route::RouteSink for FakeRoutes {
    fn publish(&self, table: Arc<crate::route::RouteTable>) {
        self.published.lock().unwrap().push(table);
    }
}

/// Wait (up to a minute) until `done` holds, looking every 10 ms; panics naming `what`.
pub async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
