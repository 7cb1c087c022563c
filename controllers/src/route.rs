//! The route controller: the proxy's routing table equals the worlds that have URLs.
//!
//! # Guarantees
//! - Each process service with `url` is routed as `<subdomain>.<world>.<domain>`, and the
//!   world's first URL service also as `<world>.<domain>` (domain: `[project] domain`, else
//!   `<project>.localhost`). A world name that is not a DNS label gets a readable,
//!   deterministic slug (`feat/login` → `feat-login-<hash>`).
//! - A shared service (`shared = true`) has a host in each world that uses it
//!   (`mail.<world>.<domain>`), routed to its project's shared instance; the shared world
//!   itself has no host.
//! - A service with `replicas = N` is one route whose backends are the ports of its ready
//!   replicas (the proxy balances over them); its `port` is replica 0's.
//! - Routes are rows of `routes` (the host is the primary key, so two worlds can never
//!   claim one host); after every change the whole table is published to the proxy as one
//!   immutable snapshot.
//! - A route exists while its world exists, running or not: the proxy can then say *why* a
//!   host does not answer (stopped, starting, failing) instead of "unknown host".

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::registry::Kind;
use crate::runtime::{Applied, Cleanup, Condition, Controller, ReconcileError};
use crate::store::{
    self, owner, write, DesiredState, ProcState, ProcessRow, RouteState, Store, StoreError, World,
};

/// The condition this controller reports.
const CONDITION: &str = Kind::Route.condition();

pub use crate::store::Route;

/// The proxy's whole routing table: an immutable snapshot, swapped as one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// By host.
    pub routes: BTreeMap<String, Route>,
}

impl RouteTable {
    /// The route for a `Host` header value (port and trailing dot ignored, case-insensitive).
    pub fn lookup(&self, host: &str) -> Option<&Route> {
        let host = strip_port(host).trim_end_matches('.').to_ascii_lowercase();
        self.routes.get(&host)
    }
}

/// `Host: a.b:8080` → `a.b` (and `[::1]:80` → `[::1]`).
pub fn strip_port(host: &str) -> &str {
    match crate::url::host_port(host) {
        Some((h, None)) => h,
        Some((h, Some(p))) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// Receives every new routing table.
pub trait RouteSink: Send + Sync + 'static {
    /// Replace the table the proxy routes by.
    fn publish(&self, table: Arc<RouteTable>);
}

/// A name as a DNS label: itself when it already is one (`login-fix`), else a slug plus a
/// short hash so two names never share a slug (`feat/login` → `feat-login-1f3a`).
pub fn dns_slug(name: &str) -> String {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid {
        return name.to_owned();
    }
    let mut slug = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug: String = slug.trim_matches('-').chars().take(50).collect();
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest.iter().take(2).map(|b| format!("{b:02x}")).collect();
    if slug.is_empty() {
        format!("w-{hash}")
    } else {
        format!("{}-{hash}", slug.trim_end_matches('-'))
    }
}

/// The base domain of a project: `[project] domain`, else `<project slug>.localhost`.
pub fn domain(world: &World) -> String {
    world
        .spec
        .project
        .domain
        .clone()
        .unwrap_or_else(|| format!("{}.localhost", dns_slug(&world.project)))
        .to_ascii_lowercase()
}

/// `(host, service, port label)` for every URL of a world, the world's own host first (the
/// first service of its group with a URL). A project's shared world has none: each world that uses a shared service has its own host
/// for it, routed to the shared instance.
pub fn hosts(world: &World) -> Vec<(String, String, String)> {
    if world.is_shared() {
        return Vec::new();
    }
    let domain = domain(world);
    let slug = dns_slug(&world.name);
    // A world of a group is reached at the services it starts; the others have no port.
    let selected = world.spec.selected(world.group.as_deref());
    let mut out = Vec::new();
    for name in world.spec.order() {
        if !selected.contains(&name) {
            continue;
        }
        let Some(p) = world.spec.services.get(&name).and_then(|s| s.process()) else {
            continue;
        };
        let Some(url) = &p.url else { continue };
        if out.is_empty() {
            out.push((
                format!("{slug}.{domain}"),
                name.clone(),
                url.port_label().to_owned(),
            ));
        }
        out.push((
            format!(
                "{}.{slug}.{domain}",
                url.subdomain(&name).to_ascii_lowercase()
            ),
            name.clone(),
            url.port_label().to_owned(),
        ));
    }
    out
}

/// Why the route controller could not converge.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReconcileError for RouteError {
    fn reason(&self) -> &'static str {
        "StoreFailed"
    }
}

/// Read the whole routing table from the store.
pub fn load_table(store: &Store) -> Result<RouteTable, StoreError> {
    let rows = store.read(store::routes)?;
    let mut routes = BTreeMap::new();
    for r in rows {
        routes.insert(r.host.clone(), r);
    }
    Ok(RouteTable { routes })
}

/// Whether one instance of a service should answer, from its process row.
fn instance_state(row: Option<&ProcessRow>) -> (RouteState, String) {
    match row {
        Some(r) if r.state == ProcState::Running && r.healthy => (RouteState::Ready, String::new()),
        // Still running and served, so a person can look at what is wrong.
        Some(r) if r.state == ProcState::Unhealthy => (RouteState::Ready, r.message.clone()),
        Some(r) if matches!(r.state, ProcState::Backoff | ProcState::Failed) => {
            (RouteState::Failing, r.message.clone())
        }
        Some(r) => (RouteState::Starting, r.message.clone()),
        None => (RouteState::Starting, "starting".into()),
    }
}

/// The route controller.
pub struct RouteController<S> {
    store: Store,
    sink: S,
}

impl<S: RouteSink> RouteController<S> {
    /// A controller over `store`, publishing to `sink`.
    pub fn new(store: Store, sink: S) -> Self {
        RouteController { store, sink }
    }

    fn publish(&self) -> Result<(), StoreError> {
        self.sink.publish(Arc::new(load_table(&self.store)?));
        Ok(())
    }

    /// What `world`'s routes point at. A shared service's URL in this world goes to the
    /// project's shared instance: its ports, its processes, its spec (which defines how
    /// many replicas it has).
    fn backends_seen_by(&self, world: &World) -> Result<Backends, StoreError> {
        let ports = self.store.read(|c| store::ports_seen_by(c, world))?;
        let mut procs = self.store.read(|c| store::processes(c, world.id))?;
        procs.retain(|p| world.runs(&p.service));
        procs.extend(self.store.read(|c| store::shared_processes(c, world))?);
        let shared = if world.is_shared() || crate::shared::declared(&world.spec).is_empty() {
            None
        } else {
            self.store
                .read(|c| store::shared_world(c, world.project_id))?
        };
        Ok(Backends {
            ports,
            procs,
            shared,
        })
    }

    /// Makes `world`'s rows of `routes` the `wanted` ones, unless they are already (the
    /// usual pass of an idle world writes nothing). Returns whether the table changed, and
    /// the hosts another world holds.
    fn write_routes(
        &self,
        world: &World,
        wanted: &[Route],
    ) -> Result<(bool, Vec<String>), RouteError> {
        let now = self.store.read(|c| store::routes_of(c, world.id))?;
        if now == seen(wanted) {
            return Ok((false, Vec::new()));
        }
        let mut taken: Vec<String> = Vec::new();
        let changed = self
            .store
            .write_with(owner::Route, |tx| -> Result<bool, RouteError> {
                let before = store::routes_of(tx, world.id)?;
                write::route::clear(tx, world.id)?;
                for r in wanted {
                    if !write::route::insert(tx, world.id, r)? {
                        taken.push(r.host.clone());
                    }
                }
                let kept: Vec<Route> = wanted
                    .iter()
                    .filter(|r| !taken.contains(&r.host))
                    .cloned()
                    .collect();
                Ok(before != seen(&kept))
            })?;
        Ok((changed, taken))
    }

    /// The condition of a world whose `host` another project's world holds.
    fn host_taken(&self, host: &str) -> Result<Condition, StoreError> {
        let owner = self.store.read(|c| store::route_holder(c, host))?;
        Ok(Condition::failed(
            CONDITION,
            "HostTaken",
            format!("{host} already routes to {owner}; give this project its own [project] domain"),
        ))
    }
}

impl<S: RouteSink> Controller for RouteController<S> {
    type Error = RouteError;

    fn kind(&self) -> Kind {
        Kind::Route
    }

    async fn startup(&self) {
        if let Err(err) = self.publish() {
            tracing::warn!(%err, "cannot load the routing table");
        }
    }

    async fn apply(&self, world: &World) -> Result<Applied, RouteError> {
        let seen = self.backends_seen_by(world)?;
        let wanted = wanted_routes(world, &seen);
        let (changed, taken) = self.write_routes(world, &wanted)?;
        if changed {
            self.publish()?;
        }
        let condition = match taken.first() {
            Some(host) => self.host_taken(host)?,
            None => routed(world, &wanted),
        };
        Ok(Applied::await_change(vec![condition]))
    }

    async fn cleanup(&self, world: &World) -> Result<Cleanup, RouteError> {
        let n = self
            .store
            .write(owner::Route, |tx| write::route::clear(tx, world.id))?;
        if n > 0 {
            self.publish()?;
        }
        Ok(Cleanup::Done)
    }
}

/// What a world's routes point at: the ports and processes it sees (a shared service's
/// are its shared world's), and that shared world.
struct Backends {
    ports: Vec<store::PortRow>,
    procs: Vec<ProcessRow>,
    shared: Option<World>,
}

/// The routes `world` should have: one per host of a service with a port.
fn wanted_routes(world: &World, seen: &Backends) -> Vec<Route> {
    let mut wanted: Vec<Route> = Vec::new();
    for (host, service, label) in hosts(world) {
        let spec = match &seen.shared {
            Some(s) if !world.runs(&service) => &s.spec,
            _ => &world.spec,
        };
        let label = if label.is_empty() {
            spec.primary_label(&service)
        } else {
            Some(label)
        };
        let Some(label) = label else { continue };
        // Each replica's port of that label (`api`, `api.1`, …); replica 0's is the
        // route's own.
        let instances: Vec<(String, Option<u16>)> = spec
            .instances(&service)
            .into_iter()
            .map(|i| {
                let port = seen
                    .ports
                    .iter()
                    .find(|p| p.service == i && p.label == label)
                    .map(|p| p.port);
                (i, port)
            })
            .collect();
        let Some(port) = instances.first().and_then(|(_, p)| *p) else {
            continue;
        };
        let (state, note, backends) = if world.desired == DesiredState::Stopped {
            let note = format!(
                "world {} is stopped; `binky up {}` starts it",
                world.name, world.name
            );
            (RouteState::Stopped, note, Vec::new())
        } else {
            service_state(&instances, &seen.procs)
        };
        wanted.push(Route {
            host,
            project: world.project.clone(),
            world: world.name.clone(),
            service,
            port,
            backends,
            https: world.spec.project.https,
            state,
            note,
        });
    }
    wanted
}

/// Whether a running world's service should answer, from its `instances` (each with its
/// port) and their process rows; and a replicated service's backends: it answers while
/// any replica does, through those that do.
fn service_state(
    instances: &[(String, Option<u16>)],
    procs: &[ProcessRow],
) -> (RouteState, String, Vec<u16>) {
    let states: Vec<(RouteState, String, Option<u16>)> = instances
        .iter()
        .map(|(i, p)| {
            let (state, note) = instance_state(procs.iter().find(|r| &r.service == i));
            (state, note, *p)
        })
        .collect();
    let mut backends = Vec::new();
    if states.len() > 1 {
        backends = states
            .iter()
            .filter(|(st, _, _)| *st == RouteState::Ready)
            .filter_map(|(_, _, p)| *p)
            .collect();
    }
    let (state, note) = match states.iter().find(|(st, _, _)| *st == RouteState::Ready) {
        Some((st, note, _)) if states.len() > 1 => (*st, note.clone()),
        _ => states
            .into_iter()
            .next()
            .map(|(st, note, _)| (st, note))
            .unwrap_or((RouteState::Starting, "starting".into())),
    };
    (state, note, backends)
}

/// A route as compared with its row: host, service, port, state, note, backends.
type Seen = store::RouteSeen;

/// `routes` as compared with rows, in host order.
fn seen(routes: &[Route]) -> Vec<Seen> {
    let mut v: Vec<Seen> = routes
        .iter()
        .map(|r| {
            (
                r.host.clone(),
                r.service.clone(),
                r.port,
                r.state.as_str().to_owned(),
                r.note.clone(),
                store::backends_text(&r.backends),
            )
        })
        .collect();
    v.sort();
    v
}

/// The condition of a world whose hosts are all its own: the hosts routed.
fn routed(world: &World, wanted: &[Route]) -> Condition {
    if world.is_shared() {
        Condition::ok(
            CONDITION,
            "NoUrls",
            "each world that uses a shared service routes its own host of it here",
        )
    } else if wanted.is_empty() {
        Condition::ok(CONDITION, "NoUrls", "no service has a url")
    } else {
        Condition::ok(
            CONDITION,
            "Routed",
            wanted
                .iter()
                .map(|r| r.host.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_labels_stay_and_others_get_a_stable_slug() {
        assert_eq!(dns_slug("login-fix"), "login-fix");
        let s = dns_slug("feat/login");
        assert!(
            s.starts_with("feat-login-") && s.len() == "feat-login-".len() + 4,
            "{s}"
        );
        assert_eq!(dns_slug("feat/login"), s);
        assert_ne!(dns_slug("feat-login"), s);
        assert_ne!(dns_slug("Login-Fix"), dns_slug("login-fix"));
        let long = dns_slug(&"x".repeat(100));
        assert!(long.len() <= 63, "{long}");
        assert!(dns_slug("...").starts_with("w-"));
    }

    #[test]
    fn hosts_strip_ports_and_case() {
        assert_eq!(strip_port("a.b:8080"), "a.b");
        assert_eq!(strip_port("a.b"), "a.b");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        let mut t = RouteTable::default();
        t.routes.insert(
            "web.w.p.localhost".into(),
            Route {
                host: "web.w.p.localhost".into(),
                project: "p".into(),
                world: "w".into(),
                service: "web".into(),
                port: 1,
                backends: Vec::new(),
                https: false,
                state: RouteState::Ready,
                note: String::new(),
            },
        );
        assert!(t.lookup("WEB.w.p.localhost.:8080").is_some());
        assert!(t.lookup("api.w.p.localhost").is_none());
    }
}
