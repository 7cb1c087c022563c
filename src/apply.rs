//! Re-reading a world's `binky.toml`: the same validation as `binky up`, the plan (what will
//! start, restart, stop, provision, migrate) and the write of the new desired state.
//!
//! `binky apply` and the daemon's config watcher both come through [`apply`], so an edit
//! saved in a worktree and `binky apply` do exactly the same thing.
//!
//! # Guarantees
//! - An invalid file never changes the world: the last good spec keeps running and the world
//!   gets a `ConfigValid` condition (reason `ConfigInvalid`) with the error, file, line and
//!   key; the next valid read clears it.
//! - The plan is computed on the dependency graph: a service restarts when its own command,
//!   environment, health check or ports changed, or when a service it interpolates
//!   (`${api.port}`, `${db.url}`) changed its address. Everything else keeps running.
//! - A slice whose service left `binky.toml` is kept (its data is never dropped by an
//!   edit); `binky remove` drops it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use binky_controllers::admission::{self, Verdict};
use binky_controllers::runtime::{self, Condition};
use binky_controllers::spec::{Resource, Service, ServiceKind, Spec};
use binky_controllers::store::{Store, StoreError, World};
use binky_controllers::tokens::Tokens;
use petgraph::graphmap::DiGraphMap;

use crate::check::Finding;
use crate::config::{self, Loaded};

/// The condition the config watcher and `binky apply` own.
pub const CONDITION: &str = binky_controllers::registry::Reporter::Config.condition();

/// Why a `binky.toml` is refused. Each message names the file (and line and key where
/// there is one).
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// The file cannot be read as text.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: config::ReadError,
    },
    /// Syntax, keys, names, cycles (each problem with its line and key).
    #[error(transparent)]
    Config(#[from] config::ConfigErrors),
    /// Admission refuses the spec (groups, limits).
    #[error("{}: {reason}", path.display())]
    Denied {
        /// The file.
        path: PathBuf,
        /// Admission's reason.
        reason: String,
    },
    /// Errors `binky check` reports (an inline credential, `${self.port}` without a port).
    #[error("{}", render(path, findings))]
    Check {
        /// The file.
        path: PathBuf,
        /// The errors, in `binky check`'s order (never empty).
        findings: Vec<Finding>,
    },
}

fn render(path: &Path, findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| f.render(path))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parse and check a `binky.toml` the way `binky up` does: syntax and keys, names, cycles,
/// groups, adapters binky can find. The error names the file (and line and key).
pub fn validate(text: &str, path: &Path, group: Option<&str>) -> Result<Loaded, Invalid> {
    let mut loaded = config::parse(text, path)?;
    if let Verdict::Deny { reason } = admission::check_spec(&loaded.spec, group) {
        return Err(Invalid::Denied {
            path: path.to_owned(),
            reason,
        });
    }
    // An adapter that is not found is not refused (it may be installed after the file is
    // written): it is said, and the service's slice fails naming it until it is found.
    let registry = crate::adapters::Registry::default();
    for name in loaded.spec.selected(group) {
        if let Some(r) = loaded.spec.services[&name].resource() {
            if let Err(source) = registry.get(&r.adapter) {
                loaded.warnings.push(config::Warning {
                    key: format!("services.{name}.adapter"),
                    line: None,
                    message: format!("{source}; the slice of `{name}` fails until it is found"),
                });
            }
        }
    }
    // The errors `binky check` reports (an inline credential, `${self.port}` without a
    // port) are refused here too.
    let findings = crate::check::errors(text, &loaded);
    if !findings.is_empty() {
        return Err(Invalid::Check {
            path: path.to_owned(),
            findings,
        });
    }
    Ok(loaded)
}

/// One line of a plan.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Step {
    /// `start`, `restart`, `stop`, `provision`, `migrate`, `keep`.
    pub action: &'static str,
    /// The service.
    pub service: String,
    /// Why.
    pub why: String,
}

/// What applying a new spec will do, in dependency order.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// The steps.
    pub steps: Vec<Step>,
    /// Something changed that restarts nothing (a URL, a restart policy, `watch`, …).
    pub other: Vec<String>,
}

impl Plan {
    /// Nothing to do at all.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.other.is_empty()
    }

    /// One line per step, for people.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{:<9} {:<12} {}", s.action, s.service, s.why))
            .collect();
        out.extend(self.other.iter().map(|o| format!("{:<9} {o}", "change")));
        out
    }

    /// One line for an event.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{} {} ({})", s.action, s.service, s.why))
            .collect();
        parts.extend(self.other.iter().cloned());
        if parts.is_empty() {
            "no change".into()
        } else {
            parts.join("; ")
        }
    }
}

/// The services whose text (`cmd`, `env`, health, …) interpolates `${svc.…}`.
fn interpolated(svc: &Service) -> BTreeSet<String> {
    let mut texts: Vec<&str> = Vec::new();
    match &svc.kind {
        ServiceKind::Process(p) => {
            texts.push(&p.cmd);
            texts.extend(p.setup.as_deref());
            texts.extend(p.env.values().map(String::as_str));
            if let Some(h) = &p.health {
                match &h.probe {
                    binky_controllers::spec::Probe::Http(t)
                    | binky_controllers::spec::Probe::Tcp(t)
                    | binky_controllers::spec::Probe::Cmd(t) => texts.push(t),
                }
            }
        }
        ServiceKind::Resource(r) => {
            texts.extend(r.admin_url.as_deref());
            texts.extend(r.migrate.as_deref());
            texts.extend(r.seed.as_deref());
            texts.extend(r.env.values().map(String::as_str));
        }
    }
    texts
        .into_iter()
        .flat_map(Tokens::referenced_services)
        .collect()
}

/// What a service's address is made of: its ports and URL (a process), or its server and
/// adapter (a resource). Dependents that interpolate it restart when this changes.
fn address_of(svc: &Service) -> String {
    match &svc.kind {
        ServiceKind::Process(p) => format!("{:?}|{:?}", p.port_labels(), p.url),
        ServiceKind::Resource(r) => format!("{}|{:?}|{:?}", r.adapter, r.admin_url, r.options),
    }
}

/// Why a process restarts on its own account, if it does.
fn process_change(old: &Service, new: &Service) -> Option<String> {
    let (ServiceKind::Process(a), ServiceKind::Process(b)) = (&old.kind, &new.kind) else {
        return Some("changed from an adapter service to a process".into());
    };
    // The process controller restarts a running service on exactly these (its key as
    // started against today's).
    let what = a.restart_key().changed(&b.restart_key());
    (!what.is_empty()).then(|| format!("{} changed", what.join(", ")))
}

/// The plan from `old` to `new` for the services a world runs (its group).
pub fn plan(old: &Spec, new: &Spec, group: Option<&str>) -> Plan {
    let was = old.selected(group);
    let now = new.selected(group);
    let graph = dependency_graph(new, &now);
    // Services whose address changed (dependents that interpolate them restart).
    let moved: BTreeSet<&str> = now
        .iter()
        .filter(|n| {
            was.contains(*n)
                && old
                    .services
                    .get(*n)
                    .is_some_and(|o| address_of(o) != address_of(&new.services[*n]))
        })
        .map(String::as_str)
        .collect();
    // Dependency order over both kinds of edge (`depends_on` and interpolation).
    let order: Vec<String> = match petgraph::algo::toposort(&graph, None) {
        Ok(nodes) => nodes.into_iter().map(str::to_owned).collect(),
        Err(_) => new.start_order().unwrap_or_else(|_| new.order()),
    };
    let mut steps = Vec::new();
    let mut other = Vec::new();
    for name in order.iter().filter(|n| now.contains(*n)) {
        let svc = &new.services[name];
        let before = old.services.get(name).filter(|_| was.contains(name));
        let change = match (before, &svc.kind) {
            (None, ServiceKind::Process(_)) => Change::Step("start", "new service".into()),
            (None, ServiceKind::Resource(r)) => {
                Change::Step("provision", format!("new {} slice", r.adapter))
            }
            (Some(o), ServiceKind::Process(_)) => {
                let uses = interpolated(svc);
                let via: Vec<&str> = graph
                    .neighbors_directed(name.as_str(), petgraph::Direction::Incoming)
                    .filter(|d| moved.contains(d) && uses.contains(*d))
                    .collect();
                process_change_of(name, o, svc, &via)
            }
            (Some(o), ServiceKind::Resource(r)) => resource_change_of(name, o, r),
        };
        match change {
            Change::Step(action, why) => steps.push(Step {
                action,
                service: name.clone(),
                why,
            }),
            Change::Other(what) => other.push(what),
            Change::Nothing => {}
        }
    }
    // Gone from the file (or from the group): processes stop, slices stay.
    for name in old
        .order()
        .iter()
        .filter(|n| was.contains(*n) && !now.contains(*n))
    {
        steps.push(gone_step(name, &old.services[name]));
    }
    if old.project != new.project {
        other.push("[project] settings".into());
    }
    if old.hooks != new.hooks || old.agents != new.agents || old.groups != new.groups {
        other.push("hooks, agents or groups".into());
    }
    Plan { steps, other }
}

/// The services `now` runs of `new`, an edge from each to the ones that depend on it or
/// interpolate its address.
fn dependency_graph<'a>(new: &'a Spec, now: &'a BTreeSet<String>) -> DiGraphMap<&'a str, ()> {
    let mut graph: DiGraphMap<&str, ()> = DiGraphMap::new();
    for name in now {
        graph.add_node(name.as_str());
    }
    for name in now {
        let svc = &new.services[name];
        for dep in svc.depends_on.iter().chain(interpolated(svc).iter()) {
            if let Some((dep, _)) = new.services.get_key_value(dep) {
                graph.add_edge(dep.as_str(), name.as_str(), ());
            }
        }
    }
    graph
}

/// What a service still in the file needs.
enum Change {
    /// A step of the plan: its action and why.
    Step(&'static str, String),
    /// A change that takes no step (said in [`Plan::other`]).
    Other(String),
    /// None.
    Nothing,
}

/// A process service that was `o`: restarted when what it runs changed or an address it
/// interpolates moved (`via`).
fn process_change_of(name: &str, o: &Service, svc: &Service, via: &[&str]) -> Change {
    if let Some(why) = process_change(o, svc) {
        Change::Step("restart", why)
    } else if !via.is_empty() {
        Change::Step(
            "restart",
            format!("uses the address of {}, which changed", via.join(", ")),
        )
    } else if o != svc {
        Change::Other(format!(
            "{name}: changed without a restart (ports, url, restart, watch, limits, the stop keys or the health check's timeout: taken at its next start, stop or probe)"
        ))
    } else {
        Change::Nothing
    }
}

/// A resource service that was `o`: a new slice when its adapter or server changed, a
/// migrate when only migrate did.
fn resource_change_of(name: &str, o: &Service, r: &Resource) -> Change {
    let Some(or) = o.resource() else {
        return Change::Step(
            "provision",
            "changed from a process to an adapter service".into(),
        );
    };
    if or.adapter != r.adapter || or.admin_url != r.admin_url {
        Change::Step(
            "provision",
            "adapter or server changed (the old slice is kept until `binky remove`)".into(),
        )
    } else if or.migrate != r.migrate {
        Change::Step(
            "migrate",
            "migrate changed; it runs on the world's own slice".into(),
        )
    } else if or != r {
        Change::Other(format!(
            "{name}: seed, clone_from or options (they apply to new worlds)"
        ))
    } else {
        Change::Nothing
    }
}

/// A service gone from the file (or the group): a process stops, a slice is kept.
fn gone_step(name: &str, svc: &Service) -> Step {
    let (action, why) = match &svc.kind {
        ServiceKind::Process(_) => ("stop", "no longer in binky.toml; its ports are released"),
        ServiceKind::Resource(_) => (
            "keep",
            "no longer in binky.toml; its slice and data are kept until `binky remove`",
        ),
    };
    Step {
        action,
        service: name.to_owned(),
        why: why.into(),
    }
}

/// What [`apply`] did.
#[derive(Debug)]
pub enum Outcome {
    /// The file says what the world already runs.
    Unchanged,
    /// The new spec was written (or, on a dry run, would be).
    Changed {
        /// The plan.
        plan: Plan,
        /// The world's generation after the write (unchanged on a dry run).
        generation: i64,
    },
    /// The file is not valid; nothing changed.
    Invalid(String),
}

/// Re-read `world`'s `binky.toml` and write the new spec when it changed (unless
/// `dry_run`). Records `ConfigValid` either way.
pub fn apply(store: &Store, world: &World, dry_run: bool) -> Result<Outcome, StoreError> {
    // A project's shared world has no file of its own: the worlds that use it write it.
    if world.is_shared() {
        return Ok(Outcome::Unchanged);
    }
    let path = &world.config_path;
    let read = config::read_text(path)
        .map_err(|source| Invalid::Unreadable {
            path: path.to_owned(),
            source,
        })
        .and_then(|text| validate(&text, path, world.group.as_deref()));
    let loaded = match read {
        Ok(l) => l,
        Err(invalid) => {
            let msg = invalid.to_string();
            // One event per distinct error: the condition says whether it is new.
            if !dry_run
                && runtime::set_condition(
                    store,
                    world,
                    runtime::Reporter::Config,
                    Condition::failed(CONDITION, "ConfigInvalid", msg.clone()),
                )?
            {
                store.event(
                    world.id,
                    "config_invalid",
                    &format!(
                        "binky.toml is invalid; the world keeps running its last good config: {msg}"
                    ),
                )?;
            }
            return Ok(Outcome::Invalid(msg));
        }
    };
    let plan = plan(&world.spec, &loaded.spec, world.group.as_deref());
    let changed = loaded.spec != world.spec;
    if dry_run {
        return Ok(if changed {
            Outcome::Changed {
                plan,
                generation: world.generation,
            }
        } else {
            Outcome::Unchanged
        });
    }
    runtime::set_condition(
        store,
        world,
        runtime::Reporter::Config,
        Condition::ok(CONDITION, "Valid", format!("{} is valid", path.display())),
    )?;
    if !changed {
        return Ok(Outcome::Unchanged);
    }
    let generation = store.set_spec(
        world.id,
        &loaded.spec,
        &format!("{} changed: {}", path.display(), plan.summary()),
    )?;
    Ok(Outcome::Changed { plan, generation })
}

/// Files each service of `spec` watches, as globs relative to the world's config directory
/// (its `workdir` prefixed), by service.
pub fn watch_globs(spec: &Spec, group: Option<&str>) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for name in spec.selected(group) {
        if let Some(p) = spec.services[&name].process() {
            if p.watch.is_empty() {
                continue;
            }
            let prefix = p.workdir.trim_start_matches("./").trim_end_matches('/');
            let globs = p
                .watch
                .iter()
                .map(|g| {
                    let g = g.trim_start_matches("./");
                    if prefix.is_empty() || prefix == "." {
                        g.to_owned()
                    } else {
                        format!("{prefix}/{g}")
                    }
                })
                .collect();
            out.insert(name, globs);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Spec {
        config::parse(text, Path::new("binky.toml")).unwrap().spec
    }

    const BASE: &str = r#"
[project]
name = "p"

[services.db]
adapter = "postgres"
migrate = "psql -f schema.sql"

[services.api]
cmd = "api --port ${self.port}"
url = "api"
depends_on = ["db"]
env = { DATABASE_URL = "${db.url}" }

[services.web]
cmd = "web --port ${self.port}"
url = "web"
env = { API = "${api.url}" }

[services.worker]
cmd = "worker"
depends_on = ["api"]
"#;

    /// The plan from [`BASE`] to BASE with each `(from, to)` replaced; a `from` BASE does
    /// not hold is a broken test.
    fn plan_edit(edits: &[(&str, &str)]) -> Plan {
        let new = edits.iter().fold(BASE.to_owned(), |text, (from, to)| {
            assert!(text.contains(from), "BASE has no {from:?}");
            text.replace(from, to)
        });
        plan(&spec(BASE), &spec(&new), None)
    }

    fn actions(p: &Plan) -> Vec<(String, String)> {
        p.steps
            .iter()
            .map(|s| (s.action.to_owned(), s.service.clone()))
            .collect()
    }

    #[test]
    fn an_env_change_restarts_only_that_service() {
        let p = plan_edit(&[("cmd = \"worker\"", "cmd = \"worker\"\nenv = { X = \"1\" }")]);
        assert_eq!(actions(&p), vec![("restart".into(), "worker".into())]);
        assert_eq!(p.steps[0].why, "env changed");
    }

    #[test]
    fn a_changed_address_restarts_the_services_that_interpolate_it_not_the_ones_that_only_depend() {
        // api gets a second port: web interpolates ${api.url}, worker only depends on api.
        let p = plan_edit(&[(
            "url = \"api\"",
            "url = \"api\"\nports = [\"http\", \"grpc\"]",
        )]);
        assert_eq!(
            actions(&p),
            vec![
                ("restart".into(), "api".into()),
                ("restart".into(), "web".into())
            ],
            "{p:?}"
        );
        assert!(p.steps[1].why.contains("api"), "{p:?}");
    }

    #[test]
    fn a_command_change_does_not_restart_dependents() {
        let p = plan_edit(&[("api --port", "api2 --port")]);
        assert_eq!(actions(&p), vec![("restart".into(), "api".into())]);
    }

    #[test]
    fn removed_processes_stop_removed_slices_are_kept_new_ones_start_in_order() {
        // db becomes cache, worker becomes new; api and web stay as they are.
        let p = plan_edit(&[
            (
                "[services.db]\nadapter = \"postgres\"\nmigrate = \"psql -f schema.sql\"",
                "[services.cache]\nadapter = \"redis\"",
            ),
            ("depends_on = [\"db\"]", "depends_on = [\"cache\"]"),
            (
                "[services.worker]\ncmd = \"worker\"\ndepends_on = [\"api\"]",
                "[services.new]\ncmd = \"new\"\ndepends_on = [\"web\"]",
            ),
        ]);
        let a = actions(&p);
        assert!(a.contains(&("provision".into(), "cache".into())), "{a:?}");
        assert!(a.contains(&("start".into(), "new".into())), "{a:?}");
        assert!(a.contains(&("stop".into(), "worker".into())), "{a:?}");
        assert!(a.contains(&("keep".into(), "db".into())), "{a:?}");
        let pos = |x: &str| a.iter().position(|(_, s)| s == x).unwrap();
        assert!(pos("cache") < pos("new"));
    }

    #[test]
    fn a_migrate_change_migrates_and_nothing_else() {
        let p = plan_edit(&[("psql -f schema.sql", "psql -f schema2.sql")]);
        assert_eq!(actions(&p), vec![("migrate".into(), "db".into())]);
    }

    #[test]
    fn the_same_spec_plans_nothing() {
        assert!(plan(&spec(BASE), &spec(BASE), None).is_empty());
    }

    #[test]
    fn watch_globs_carry_the_workdir() {
        let s = spec(
            r#"
[project]
name = "p"

[services.api]
cmd = "x"
workdir = "backend"
watch = ["src/**/*.py", "./conf.yml"]
"#,
        );
        assert_eq!(
            watch_globs(&s, None)["api"],
            vec!["backend/src/**/*.py", "backend/conf.yml"]
        );
    }
}
