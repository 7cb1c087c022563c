//! A world's environment: the tokens its config resolves against, the variables each
//! command gets, and what `binky env` hands out.
//!
//! # Guarantees
//! - Every command binky runs in a world — a service, its `setup` and health command, an
//!   adapter's `migrate` and `seed`, a hook, `binky exec` (with or without `-s`), `binky
//!   verify` and the MCP tools that run them — gets its directory and variables from one
//!   function, [`world_command_env`], over one [`Snapshot`] of the store read in one
//!   transaction. Where their environments differ, [`WorldCommand`] says so and why.
//! - What comes after it is the same for every command: `${secret:REF}` is resolved from
//!   the text it leaves (by the daemon's supervisor when it starts the process or runs the
//!   health command, by `binky exec` and `binky verify` themselves), and nothing else is
//!   added but what [`WorldCommand`] names.
//! - A service's `env_file`s are read for it; a command of the whole world reads every
//!   service's, so a settings module that needs them loads under `binky exec` too.
//! - What a service declares in its `env` wins over what binky hands out by name
//!   (`API_URL = "${api.url}"` over the exported `API_URL`, the proxy URL), so a world's
//!   commands see what its services see; `binky env` and MCP's `env` give each name that
//!   same value ([`handed_out`]): one name, one value, wherever binky gives it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::route;
use crate::spec::Service;
use crate::store::{self, PortRow, ProxyView, SliceRow, Store, StoreError, World};
use crate::tokens::Tokens;

/// What a world's environment is built from, read in one store transaction so that its
/// ports, slices and proxy agree with each other.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Everything a token resolves to.
    pub tokens: Tokens,
    /// Where the proxy listens (for the exported URLs).
    pub proxy: ProxyView,
}

impl Snapshot {
    /// Read `world`'s ports, slices and the proxy's ports at once.
    pub fn read(store: &Store, world: &World) -> Result<Snapshot, StoreError> {
        // One read is one transaction: the three are one state of the store.
        store.read(|c| {
            let ports = store::ports_seen_by(c, world)?;
            let proxy = store::proxy_view(c)?;
            let slices = store::slices_seen_by(c, world)?;
            Ok(Snapshot::of(world, &ports, proxy, &slices))
        })
    }

    /// A snapshot of what the caller read.
    pub fn of(world: &World, ports: &[PortRow], proxy: ProxyView, slices: &[SliceRow]) -> Snapshot {
        Snapshot {
            tokens: tokens(world, ports, &proxy, slices),
            proxy,
        }
    }

    /// With `service`'s slice at `url` giving `tokens` (a golden template's, which is no
    /// world's row).
    pub fn with_slice(
        mut self,
        service: &str,
        url: &str,
        tokens: &BTreeMap<String, String>,
    ) -> Snapshot {
        self.tokens.urls.insert(service.to_owned(), url.to_owned());
        for (k, v) in tokens {
            self.tokens
                .extra
                .insert((service.to_owned(), k.clone()), v.clone());
        }
        self
    }
}

/// The variable every command binky runs for a world carries (`<project>/<world>`): what
/// tells it from a person's (`binky approve` and `binky settings` refuse it). `binky env`
/// never hands it out.
pub const SPAWNED_IN: &str = "BINKY_SPAWNED_IN";

/// Whose variables a command gets: a process service's, an adapter service's, or the
/// world's (see [`WorldCommand`], which picks one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runner<'a> {
    /// A process service's instance (`api`, `api.1`).
    Service(&'a str),
    /// An adapter service: `DATABASE_URL` is its slice's address.
    Slice(&'a str),
    /// The world as a whole.
    World,
}

/// A command binky runs for a world. Every one gets its environment from
/// [`world_command_env`]; the kind decides only where they must differ:
///
/// - whose variables: a process service's own (its `cmd`, `setup` and health command see
///   one environment: a setup prepares what the service runs with, and a health command
///   checks the service as it runs, `pg_isready -d "$DATABASE_URL"`); an adapter
///   service's (`migrate` and `seed` run against its slice: `DATABASE_URL` is its
///   address); or the whole world's (hooks, `verify`, `exec` without `-s`: no service is
///   theirs, so they see every service's URLs and declared `env`);
/// - where: a hook runs at the worktree's top (a `post_up` of `make seed` is written for
///   the repository, wherever `binky.toml` is); the others in their service's `workdir`
///   or beside `binky.toml`;
/// - under what: `binky exec` and `binky verify` keep their caller's environment beneath
///   the world's ([`CommandEnv::over_callers`]: `FOO=x binky verify`, a terminal's `TERM`
///   and `SSH_AUTH_SOCK`, as `docker compose exec` does), while what the daemon runs starts
///   from the world's stored environment alone, so a daemon's own variables
///   (`BINKY_SECRET_*`, another shell's `PATH`) never reach a service;
/// - the name its secrets are audited under ([`WorldCommand::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorldCommand<'a> {
    /// A process service's instance (`api`, `api.1`): its `cmd`, its `setup` and its health
    /// command.
    Service(&'a str),
    /// An adapter service's `migrate` or `seed` (a golden template's build too).
    Slice(&'a str),
    /// A hook of the world (`post_up`, `pre_down`).
    Hook(&'a str),
    /// `binky exec`: of a service (`-s`, a process or an adapter service), or of the world.
    Exec(Option<&'a str>),
    /// `binky verify`.
    Verify,
}

impl WorldCommand<'_> {
    /// Whose variables it gets in `world`.
    fn runner(&self, world: &World) -> Runner<'_> {
        match *self {
            WorldCommand::Service(s) => Runner::Service(s),
            WorldCommand::Slice(s) => Runner::Slice(s),
            WorldCommand::Exec(Some(s)) if world.spec.resource(s).is_some() => Runner::Slice(s),
            WorldCommand::Exec(Some(s)) => Runner::Service(s),
            WorldCommand::Hook(_) | WorldCommand::Exec(None) | WorldCommand::Verify => {
                Runner::World
            }
        }
    }

    /// What it is called where its run is recorded (the secrets' audit, the supervisor's
    /// spec): the service, `hook:post_up`, `exec` or `verify`.
    pub fn name(&self) -> String {
        match *self {
            WorldCommand::Service(s) | WorldCommand::Slice(s) | WorldCommand::Exec(Some(s)) => {
                s.to_owned()
            }
            WorldCommand::Hook(which) => format!("hook:{which}"),
            WorldCommand::Exec(None) => "exec".into(),
            WorldCommand::Verify => "verify".into(),
        }
    }

    /// Whether it runs under its caller's environment (`binky exec`, `binky verify`).
    pub fn keeps_callers_env(&self) -> bool {
        matches!(self, WorldCommand::Exec(_) | WorldCommand::Verify)
    }
}

/// Where a world's command runs and with what.
#[derive(Clone, Debug)]
pub struct CommandEnv {
    /// Its working directory.
    pub dir: PathBuf,
    /// Its variables (the world's environment included).
    pub vars: BTreeMap<String, String>,
    /// The tokens its own text resolves against (its `env_file`s' variables included).
    pub tokens: Tokens,
    /// `env_file`s that were not there.
    pub missing_env_files: Vec<PathBuf>,
    /// Variables of the services' `env` whose tokens resolve to nothing here (a slice the
    /// world does not make, a port of a service it does not run: `binky up W --group …`).
    /// A command of the whole world goes without them (never with `${db.port}` as text);
    /// a service's or a slice's own command is not to be run with them (the daemon holds
    /// that service, `binky exec -s` refuses).
    pub unresolved: Vec<Unresolved>,
}

/// A variable of a service's `env` whose value names tokens that resolve to nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved {
    /// The service that declares it.
    pub service: String,
    /// The variable.
    pub var: String,
    /// The tokens, as written (`${cache.port}`).
    pub tokens: Vec<String>,
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of `{}` ({})",
            self.var,
            self.service,
            self.tokens.join(", ")
        )
    }
}

/// The variables of `env` (declared by `service`) whose values name tokens that resolve
/// to nothing against `tokens`.
fn unresolved_of<'a>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
    service: &str,
    tokens: &Tokens,
) -> Vec<Unresolved> {
    env.into_iter()
        .filter_map(|(k, v)| {
            let names = tokens.unresolved(v, service);
            (!names.is_empty()).then(|| Unresolved {
                service: service.to_owned(),
                var: k.clone(),
                tokens: names,
            })
        })
        .collect()
}

/// Why no environment could be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The service is not in the world's spec (or is not of the kind asked).
    #[error("world `{world}` has no {kind} `{service}`")]
    NoService {
        /// The world.
        world: String,
        /// The name asked for.
        service: String,
        /// "process service" or "adapter service".
        kind: &'static str,
    },
    /// An adapter service's slice has no address yet.
    #[error("the slice of `{service}` in world `{world}` is not made yet{why}; run `binky up {world}` first")]
    SliceNotMade {
        /// The world.
        world: String,
        /// The adapter service.
        service: String,
        /// ` (the slice's message)`, or empty.
        why: String,
    },
}

/// The directory and variables of the command `command` of `world` (checked out at
/// `layout`), from `snap`; `ca` is binky's CA, given to Node clients as
/// `NODE_EXTRA_CA_CERTS` when it exists. The one way to a world command's environment:
/// `${secret:…}` is left as written, for whoever starts the process to resolve at the last
/// moment (see the module's guarantees).
pub fn world_command_env(
    world: &World,
    layout: &Layout,
    snap: &Snapshot,
    command: WorldCommand<'_>,
    ca: Option<&Path>,
) -> Result<CommandEnv, EnvError> {
    let mut ce = command_env(world, layout, snap, command.runner(world), ca)?;
    if let WorldCommand::Hook(_) = command {
        // A hook is the repository's: it runs at the worktree's top (see [`WorldCommand`]).
        ce.dir = layout.worktree.clone();
        ce.vars
            .insert("PWD".into(), ce.dir.to_string_lossy().into_owned());
    }
    Ok(ce)
}

impl CommandEnv {
    /// What a command run for a caller (`binky exec`, `binky verify`: see
    /// [`WorldCommand::keeps_callers_env`]) sets on top of the caller's own environment,
    /// which it keeps (`FOO=x binky exec …`, `CI=1 binky verify`, as with `docker compose
    /// exec -e`): what binky sets for the world or service (URLs, ports, `env`, `env_file`)
    /// always, and the world's stored environment (that of the `binky up` that wrote it)
    /// only where the caller lacks the variable (`callers_has`).
    pub fn over_callers<'a>(
        &'a self,
        world: &'a World,
        callers_has: impl Fn(&str) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a String, &'a String)> + 'a {
        self.vars.iter().filter(move |(k, v)| {
            let from_world = world.env.get(*k) == Some(*v);
            !from_world || !callers_has(k)
        })
    }
}

/// The directory and variables of a command `runner` runs in `world`: what
/// [`world_command_env`] starts from.
fn command_env(
    world: &World,
    layout: &Layout,
    snap: &Snapshot,
    runner: Runner<'_>,
    ca: Option<&Path>,
) -> Result<CommandEnv, EnvError> {
    let mut tokens = snap.tokens.clone();
    // `${worktree.path}` is where the worktree is (an adopted one may be elsewhere).
    let wt = layout.worktree.to_string_lossy().into_owned();
    tokens.worktree_path = Some(wt.clone());
    let no_service = |service: &str, kind| EnvError::NoService {
        world: world.name.clone(),
        service: service.to_owned(),
        kind,
    };
    let mut unresolved = Vec::new();
    let (dir, mut vars, missing, process) = match runner {
        Runner::Service(instance) => {
            let svc = world
                .spec
                .services
                .get(crate::replica::service_of(instance))
                .filter(|s| s.process().is_some())
                .ok_or_else(|| no_service(instance, "process service"))?;
            let process = svc.process();
            let dir = layout.workdir(world, svc);
            let files = process.map(|p| p.env_file.as_slice()).unwrap_or_default();
            let (file_vars, missing) = read_env_files(&dir, files);
            for (k, v) in &file_vars {
                tokens.env.insert(k.clone(), v.clone());
            }
            let vars = service_env(world, instance, svc, &tokens, &file_vars);
            if let Some(p) = process {
                unresolved = unresolved_of(&p.env, instance, &tokens);
            }
            (dir, vars, missing, process)
        }
        Runner::Slice(service) => {
            let res = world
                .spec
                .resource(service)
                .ok_or_else(|| no_service(service, "adapter service"))?;
            let url = tokens
                .urls
                .get(service)
                .cloned()
                .ok_or_else(|| EnvError::SliceNotMade {
                    world: world.name.clone(),
                    service: service.to_owned(),
                    why: String::new(),
                })?;
            let (dir, missing) =
                adapter_command_env(world, layout, service, res, &mut tokens, &url);
            unresolved = unresolved_of(&res.env, service, &tokens);
            (dir, missing.0, missing.1, None)
        }
        Runner::World => {
            let (dir, vars, missing) =
                world_vars(world, layout, snap, &mut tokens, &mut unresolved);
            (dir, vars, missing, None)
        }
    };
    vars.insert("BINKY_WORKTREE_PATH".into(), wt);
    vars.insert("PWD".into(), dir.to_string_lossy().into_owned());
    // What marks a command as one binky runs for a world: person-only actions refuse it.
    vars.insert(
        SPAWNED_IN.into(),
        format!("{}/{}", world.project, world.name),
    );
    if let Some(ca) = ca.filter(|c| c.is_file()) {
        let callers = world.env.get("NODE_EXTRA_CA_CERTS").map(String::as_str);
        give_node_ca(&mut vars, ca, process, callers);
    }
    Ok(CommandEnv {
        dir,
        vars,
        tokens,
        missing_env_files: missing,
        unresolved,
    })
}

/// A command of the whole world: the world's environment, every service's URL and ports
/// (as `binky env` hands them out), every process service's `env_file`s, `BINKY_WORKTREE`
/// and `BINKY_PROJECT`, then what the services declare in `env` (a service's own
/// `${self.…}` means nothing here and is left out, as is a variable whose tokens resolve to
/// nothing, which joins `unresolved`). Where services disagree, the first in start order
/// wins (a backend before the frontend that calls it).
fn world_vars(
    world: &World,
    layout: &Layout,
    snap: &Snapshot,
    tokens: &mut Tokens,
    unresolved: &mut Vec<Unresolved>,
) -> (PathBuf, BTreeMap<String, String>, Vec<PathBuf>) {
    let dir = layout.config_dir(world);
    let mut vars = world.env.clone();
    vars.extend(exported(world, tokens, &snap.proxy));
    let order = world
        .spec
        .start_order()
        .unwrap_or_else(|_| world.spec.services.keys().cloned().collect());
    let processes: Vec<(&String, &Service, &crate::spec::Process)> = order
        .iter()
        .filter_map(|n| world.spec.services.get_key_value(n))
        .filter_map(|(n, s)| s.process().map(|p| (n, s, p)))
        .collect();
    let mut missing = Vec::new();
    let mut from_files: BTreeMap<String, String> = BTreeMap::new();
    for (_, svc, p) in &processes {
        let (file_vars, gone) = read_env_files(&layout.workdir(world, svc), &p.env_file);
        missing.extend(gone);
        for (k, v) in file_vars {
            from_files.entry(k).or_insert(v);
        }
    }
    for (k, v) in &from_files {
        tokens.env.insert(k.clone(), v.clone());
        vars.insert(k.clone(), v.clone());
    }
    vars.insert("BINKY_WORKTREE".into(), world.name.clone());
    vars.insert("BINKY_PROJECT".into(), world.project.clone());
    let mut declared: BTreeMap<String, String> = BTreeMap::new();
    for (name, _, p) in &processes {
        for (k, v) in &p.env {
            if v.contains("${self.") || declared.contains_key(k) {
                continue;
            }
            let names = tokens.unresolved(v, name);
            if !names.is_empty() {
                unresolved.push(Unresolved {
                    service: (*name).clone(),
                    var: k.clone(),
                    tokens: names,
                });
                continue;
            }
            declared
                .entry(k.clone())
                .or_insert_with(|| tokens.resolve(v, name));
        }
    }
    vars.extend(declared);
    (dir, vars, missing)
}

/// `web-ui` → `WEB_UI`: an environment-variable-safe, upper-case form of a name.
///
/// A dash (`WEB-UI_URL`) would be silently dropped from a child's environment by `/bin/sh`,
/// so every character outside `[A-Za-z0-9_]` becomes `_`.
pub fn env_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Where a world's files live: its worktree and the directory holding its `binky.toml`.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The worktree root.
    pub worktree: PathBuf,
}

impl Layout {
    /// The directory holding `binky.toml` inside the worktree.
    pub fn config_dir(&self, world: &World) -> PathBuf {
        if world.config_rel.is_empty() {
            self.worktree.clone()
        } else {
            self.worktree.join(&world.config_rel)
        }
    }

    /// A service's working directory.
    pub fn workdir(&self, world: &World, service: &Service) -> PathBuf {
        let dir = self.config_dir(world);
        match service.process() {
            Some(p) if p.workdir != "." && !p.workdir.is_empty() => dir.join(&p.workdir),
            _ => dir,
        }
    }
}

/// A service's `workdir` (relative to `binky.toml`'s directory) relative to the worktree's
/// top, `""` for the top: what [`crate::store::BootstrapRow::needed_by`] takes.
pub fn workdir_rel(world: &World, workdir: &str) -> String {
    let dir = world.config_rel.trim_matches('/');
    let w = workdir.trim_matches('/');
    let w = if w == "." { "" } else { w };
    match (dir.is_empty(), w.is_empty()) {
        (true, _) => w.to_owned(),
        (false, true) => dir.to_owned(),
        (false, false) => format!("{dir}/{w}"),
    }
}

/// `http://host`, `https://host:8443`: the default port of the scheme is left out.
fn with_port(scheme: &str, host: &str, port: u16) -> String {
    match (scheme, port) {
        ("http", 80) | ("https", 443) => format!("{scheme}://{host}"),
        _ => format!("{scheme}://{host}:{port}"),
    }
}

/// The proxy URL of a service with `url`: `http://<sub>.<world>.<domain>` (https when the
/// project serves HTTPS), with the proxy's port when it is not the scheme's default.
pub fn proxy_url(world: &World, service: &str, proxy: &ProxyView) -> Option<String> {
    // A shared service's URLs are its users' (`mail.<world>.<domain>`), none its own.
    if world.is_shared() {
        return None;
    }
    let url = world.spec.services.get(service)?.process()?.url.as_ref()?;
    let host = format!(
        "{}.{}.{}",
        url.subdomain(service).to_ascii_lowercase(),
        route::dns_slug(&world.name),
        route::domain(world)
    );
    scheme_url(world, &host, proxy)
}

fn scheme_url(world: &World, host: &str, proxy: &ProxyView) -> Option<String> {
    if world.spec.project.https {
        if let Some(p) = proxy.https_port {
            return Some(with_port("https", host, p));
        }
    }
    proxy.http_port.map(|p| with_port("http", host, p))
}

/// The world's own URL (`http://<world>.<domain>`: its first URL service), if it has one.
pub fn world_url(world: &World, proxy: &ProxyView) -> Option<String> {
    let (host, _, _) = route::hosts(world).into_iter().next()?;
    scheme_url(world, &host, proxy)
}

/// The direct URL of a process service that has a port (`http://localhost:<port>`).
pub fn process_url(tokens: &Tokens, service: &str, spec_service: &Service) -> Option<String> {
    let process = spec_service.process()?;
    let label = process
        .url
        .as_ref()
        .map(|u| u.port_label().to_owned())
        .filter(|l| !l.is_empty());
    let port = match label {
        Some(l) => tokens.ports.get(&(service.to_owned(), l)).copied(),
        None => tokens.primary_port(service),
    }?;
    Some(format!("http://localhost:{port}"))
}

/// The tokens of a world, from its spec, its port assignments and where the proxy listens:
/// `${svc.url}` of a process service is its direct `http://localhost:<port>` (a
/// service-to-service call needs no name resolution of `*.localhost`, which many
/// runtimes lack), `${svc.proxy_url}` of a service with `url` its proxy URL.
pub fn tokens(world: &World, ports: &[PortRow], proxy: &ProxyView, slices: &[SliceRow]) -> Tokens {
    let mut t = Tokens {
        world: world.name.clone(),
        worktree_path: Some(world.worktree_path.to_string_lossy().into_owned()),
        env: world.env.clone(),
        ..Tokens::default()
    };
    for p in ports {
        t.ports.insert((p.service.clone(), p.label.clone()), p.port);
    }
    for name in world.spec.services.keys() {
        if let Some(label) = world.spec.primary_label(name) {
            t.primary.insert(name.clone(), label);
        }
    }
    for (name, svc) in &world.spec.services {
        let proxied = proxy_url(world, name, proxy);
        // Every replica: its own ports (`${self.port}` of `api.1`) and direct address; the
        // proxy URL is the service's, balanced over them all. Replica 0 is the service.
        for instance in world.spec.instances(name) {
            if instance != *name {
                if let Some(label) = world.spec.primary_label(name) {
                    t.primary.insert(instance.clone(), label);
                }
            }
            if let Some(url) = process_url(&t, &instance, svc) {
                t.urls.insert(instance.clone(), url);
            }
            if let Some(url) = &proxied {
                t.proxy_urls.insert(instance, url.clone());
            }
        }
    }
    // An adapter service's `${svc.url}` is its slice's address; its other tokens
    // (`${cache.prefix}`) come from the adapter.
    for s in slices {
        if world.spec.resource(&s.service).is_some() {
            if let Some(addr) = &s.address {
                t.urls.insert(s.service.clone(), addr.clone());
            }
            for (k, v) in &s.tokens {
                t.extra.insert((s.service.clone(), k.clone()), v.clone());
            }
        }
    }
    t
}

/// Parse a dotenv file: `KEY=value`, `export KEY=value`, `#` comments, single or double
/// quotes (double quotes understand `\n`, `\"` and `\\`).
pub fn parse_dotenv(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            continue;
        }
        let value = value.trim();
        let value = if let Some(inner) = value
            .strip_prefix('"')
            .and_then(|v| v.rfind('"').map(|end| &v[..end]))
        {
            let mut s = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    match chars.next() {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(other) => s.push(other),
                        None => s.push('\\'),
                    }
                } else {
                    s.push(c);
                }
            }
            s
        } else if let Some(inner) = value
            .strip_prefix('\'')
            .and_then(|v| v.rfind('\'').map(|end| &v[..end]))
        {
            inner.to_owned()
        } else {
            // An unquoted value ends at an inline comment.
            match value.find(" #") {
                Some(i) => value[..i].trim_end().to_owned(),
                None => value.to_owned(),
            }
        };
        out.push((key.to_owned(), value));
    }
    out
}

/// The variables of a service's `env_file`s, in order, and the files that were missing.
pub fn read_env_files(dir: &Path, files: &[String]) -> (Vec<(String, String)>, Vec<PathBuf>) {
    let mut vars = Vec::new();
    let mut missing = Vec::new();
    for f in files {
        let path = dir.join(f);
        match std::fs::read_to_string(&path) {
            Ok(text) => vars.extend(parse_dotenv(&text)),
            Err(_) => missing.push(path),
        }
    }
    (vars, missing)
}

/// The environment one process service (`service`: one of its instances, see
/// [`crate::replica`]) runs with, lowest precedence first: the environment `binky up` was
/// run with, the `env_file`s, `BINKY_WORKTREE`, `BINKY_REPLICA` (of a replicated service),
/// `PORT`, `PORT_<LABEL>`, then the service's own `env` (tokens resolved).
fn service_env(
    world: &World,
    service: &str,
    spec_service: &Service,
    tokens: &Tokens,
    env_files: &[(String, String)],
) -> BTreeMap<String, String> {
    let mut env = world.env.clone();
    let mut t = tokens.clone();
    for (k, v) in env_files {
        env.insert(k.clone(), v.clone());
        t.env.insert(k.clone(), v.clone());
    }
    env.insert("BINKY_WORKTREE".into(), world.name.clone());
    env.insert(
        "BINKY_WORKTREE_PATH".into(),
        tokens
            .worktree_path
            .clone()
            .unwrap_or_else(|| world.worktree_path.to_string_lossy().into_owned()),
    );
    env.insert("BINKY_PROJECT".into(), world.project.clone());
    // `service` is an instance (`api`, `api.1`): a replicated service's replicas learn which
    // one they are (a service with one replica runs with the environment it always had).
    if spec_service.process().is_some_and(|p| p.replicas > 1) {
        env.insert(
            "BINKY_REPLICA".into(),
            crate::replica::split(service).1.to_string(),
        );
    }
    if let Some(port) = tokens.primary_port(service) {
        env.insert("PORT".into(), port.to_string());
    }
    for ((svc, label), port) in &tokens.ports {
        if svc == service && !label.is_empty() {
            env.insert(format!("PORT_{}", env_name(label)), port.to_string());
        }
    }
    if let Some(p) = spec_service.process() {
        for (k, v) in &p.env {
            env.insert(k.clone(), t.resolve(v, service));
        }
    }
    env
}

/// The directory and environment an adapter service's `migrate` and `seed` run with (and
/// `binky exec W -s <adapter service>`): the world's environment, the service's
/// `env_file`s, `BINKY_WORKTREE`, `BINKY_PROJECT`, `DATABASE_URL` = the slice's address
/// (`url`), then the service's own `env` (tokens resolved). `tokens` gains the files'
/// variables.
fn adapter_command_env(
    world: &World,
    layout: &Layout,
    service: &str,
    res: &crate::spec::Resource,
    tokens: &mut Tokens,
    url: &str,
) -> (PathBuf, (BTreeMap<String, String>, Vec<PathBuf>)) {
    let dir = layout.config_dir(world);
    let workdir = if res.workdir.is_empty() || res.workdir == "." {
        dir
    } else {
        dir.join(&res.workdir)
    };
    let (vars, missing) = read_env_files(&workdir, &res.env_file);
    let mut e = world.env.clone();
    for (k, v) in &vars {
        e.insert(k.clone(), v.clone());
        tokens.env.insert(k.clone(), v.clone());
    }
    e.insert("BINKY_WORKTREE".into(), world.name.clone());
    e.insert("BINKY_PROJECT".into(), world.project.clone());
    e.insert("DATABASE_URL".into(), url.to_owned());
    for (k, v) in &res.env {
        e.insert(k.clone(), tokens.resolve(v, service));
    }
    (workdir, (e, missing))
}

/// Give a process (`process`: the service it runs for, if any) binky's CA as
/// `NODE_EXTRA_CA_CERTS`, unless the service's own `env` names a file; `callers` is the
/// value the caller's environment has (see [`node_extra_ca`]).
pub fn give_node_ca(
    env: &mut BTreeMap<String, String>,
    ca: &Path,
    process: Option<&crate::spec::Process>,
    callers: Option<&str>,
) {
    if process.is_some_and(|p| p.env.contains_key("NODE_EXTRA_CA_CERTS")) {
        return;
    }
    env.insert("NODE_EXTRA_CA_CERTS".into(), node_extra_ca(ca, callers));
}

/// The `NODE_EXTRA_CA_CERTS` a process gets: binky's CA (`ca`), and, when the caller's
/// environment already names a file (a company's proxy CA), a bundle of both next to
/// `ca` (Node reads only one file), made once per such file.
pub fn node_extra_ca(ca: &Path, callers: Option<&str>) -> String {
    let own = ca.to_string_lossy().into_owned();
    let Some(theirs) = callers.filter(|c| !c.is_empty() && *c != own) else {
        return own;
    };
    use sha2::{Digest, Sha256};
    let tag: String = Sha256::digest(theirs.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let bundle = ca.with_file_name(format!("node-extra-ca-{tag}.pem"));
    if bundle.is_file() {
        return bundle.to_string_lossy().into_owned();
    }
    match (std::fs::read_to_string(theirs), std::fs::read_to_string(ca)) {
        (Ok(mut both), Ok(ours)) => {
            if !both.ends_with('\n') {
                both.push('\n');
            }
            both.push_str(&ours);
            if crate::whole_file::Whole::new()
                .write(&bundle, both.as_bytes())
                .is_ok()
            {
                return bundle.to_string_lossy().into_owned();
            }
            theirs.to_owned()
        }
        // Their file is unreadable: Node would ignore it with a warning; ours still works.
        (Err(_), _) => own,
        (Ok(_), Err(_)) => theirs.to_owned(),
    }
}

/// What `binky env` hands out: `<SVC>_URL`, `<SVC>_PORT` and `<SVC>_PORT_<LABEL>` for each
/// exposed service (`[agents] expose`, else every service) the world's group starts, plus
/// `BINKY_WORKTREE`, `BINKY_PROJECT` and `BINKY_URL` (the world's own URL).
pub fn exported(world: &World, tokens: &Tokens, proxy: &ProxyView) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("BINKY_WORKTREE".into(), world.name.clone());
    out.insert("BINKY_PROJECT".into(), world.project.clone());
    if let Some(url) = world_url(world, proxy) {
        out.insert("BINKY_URL".into(), url);
    }
    let expose = &world.spec.agents.expose;
    // A service outside the world's group has no port and no route: no URL leads to it.
    let selected = world.spec.selected(world.group.as_deref());
    for name in world.spec.services.keys() {
        if (!expose.is_empty() && !expose.contains(name)) || !selected.contains(name) {
            continue;
        }
        let key = env_name(name);
        if let Some(url) = tokens.shown_url(name) {
            out.insert(format!("{key}_URL"), url.clone());
        }
        if let Some(port) = tokens.primary_port(name) {
            out.insert(format!("{key}_PORT"), port.to_string());
        }
        for ((svc, label), port) in &tokens.ports {
            if svc == name && !label.is_empty() {
                out.insert(format!("{key}_PORT_{}", env_name(label)), port.to_string());
            }
        }
    }
    out
}

/// What `binky env` (and MCP's `env`) hands out: the names of [`exported`], each with the
/// value a command of the whole world gets ([`world_command_env`] of `binky verify`, as
/// of `binky exec` and hooks), so one name has one value wherever binky gives it.
/// That is the proxy URL for `<SVC>_URL`, unless a service's `env` (or `env_file`) sets
/// that name itself (`API_URL = "${api.url}"`, the direct address): then its value, as the
/// commands and services see it. `layout` is where the worktree is.
pub fn handed_out(world: &World, layout: &Layout, snap: &Snapshot) -> BTreeMap<String, String> {
    let names = exported(world, &snap.tokens, &snap.proxy);
    let commands = world_command_env(world, layout, snap, WorldCommand::Verify, None)
        .map(|ce| ce.vars)
        .unwrap_or_default();
    names
        .into_iter()
        .map(|(k, v)| {
            let v = commands.get(&k).cloned().unwrap_or(v);
            (k, v)
        })
        .collect()
}

/// Each exported service's URL through binky's proxy (or its direct address where it has
/// none), by service: what a browser or a request through the proxy uses.
pub fn shown_urls(world: &World, tokens: &Tokens) -> BTreeMap<String, String> {
    let expose = &world.spec.agents.expose;
    let selected = world.spec.selected(world.group.as_deref());
    world
        .spec
        .services
        .keys()
        .filter(|n| (expose.is_empty() || expose.contains(*n)) && selected.contains(*n))
        .filter(|n| world.spec.services[*n].process().is_some())
        .filter_map(|n| Some((n.clone(), tokens.shown_url(n)?.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_shell_safe() {
        assert_eq!(env_name("web-ui"), "WEB_UI");
        assert_eq!(env_name("api.v2"), "API_V2");
        assert_eq!(env_name("db"), "DB");
    }

    #[test]
    fn dotenv_understands_quotes_comments_and_export() {
        let vars = parse_dotenv(
            "# comment\nA=1\nexport B = two words \nC=\"x\\ny\" \nD='$NOT' \nE=v # note\n\nbad line\n=x\n",
        );
        assert_eq!(
            vars,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x\ny".into()),
                ("D".into(), "$NOT".into()),
                ("E".into(), "v".into()),
            ]
        );
    }

    #[test]
    fn node_ca_is_binkys_a_bundle_with_the_callers_or_the_services_own() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, "BINKY CA\n").unwrap();
        let theirs = dir.path().join("company.pem");
        std::fs::write(&theirs, "COMPANY CA").unwrap();
        let mut env = BTreeMap::new();
        give_node_ca(&mut env, &ca, None, None);
        assert_eq!(env["NODE_EXTRA_CA_CERTS"], ca.display().to_string());
        give_node_ca(&mut env, &ca, None, Some(&theirs.display().to_string()));
        let bundle = std::fs::read_to_string(&env["NODE_EXTRA_CA_CERTS"]).unwrap();
        assert_eq!(bundle, "COMPANY CA\nBINKY CA\n");
        // A service that sets it in its own env keeps its value.
        let svc = crate::testing::web("node server.js", &[]);
        let mut process = svc.process().unwrap().clone();
        process
            .env
            .insert("NODE_EXTRA_CA_CERTS".into(), "/mine.pem".into());
        let mut env = BTreeMap::from([("NODE_EXTRA_CA_CERTS".to_owned(), "/mine.pem".to_owned())]);
        give_node_ca(&mut env, &ca, Some(&process), None);
        assert_eq!(env["NODE_EXTRA_CA_CERTS"], "/mine.pem");
        // A caller's file that cannot be read: binky's alone.
        let mut env = BTreeMap::new();
        give_node_ca(&mut env, &ca, None, Some("/no/such/file.pem"));
        assert_eq!(env["NODE_EXTRA_CA_CERTS"], ca.display().to_string());
    }
}
