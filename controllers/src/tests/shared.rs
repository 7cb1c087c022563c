//! `shared = true`: one instance per project, in its shared world, run while a world uses it.

use std::collections::BTreeSet;

use super::process::{h, H};
use crate::route::RouteController;
use crate::spec::{Service, Spec};
use crate::store::{self, DesiredState, ProcState, Store, World, WorldId};
use crate::testing::*;

fn shared(mut svc: Service) -> Service {
    svc.shared = true;
    svc
}

/// mail (shared, with a URL), and api, which depends on it and reads its port and URL.
fn config() -> Spec {
    let mut api = web("serve api", &["mail"]);
    if let crate::spec::ServiceKind::Process(p) = &mut api.kind {
        p.env.insert("MAIL_PORT".into(), "${mail.port}".into());
        p.env.insert("MAIL_URL".into(), "${mail.url}".into());
    }
    spec(vec![("mail", shared(web("mailpit", &[]))), ("api", api)])
}

fn up(h: &H, name: &str, s: Spec) -> WorldId {
    h.store
        .put_world(&new_world(h.dir.path(), name, s))
        .unwrap()
        .world
        .id
}

fn shared_world(store: &Store) -> Option<World> {
    store
        .read(|c| store::world_by_name(c, "acme", "@shared"))
        .unwrap()
}

/// Converge every world of the store (the shared one too), as the runtime would.
async fn converge_all(h: &H) {
    for _ in 0..4 {
        for id in h.store.read(store::world_ids).unwrap() {
            h.converge(id).await;
        }
    }
}

/// Live processes of `service` and the world each runs in.
fn live(h: &H, service: &str) -> Vec<WorldId> {
    let sup = h.sup.inner.lock().unwrap();
    sup.procs
        .values()
        .filter(|p| p.spec.service == service && p.exit.is_none())
        .map(|p| p.spec.world)
        .collect()
}

fn ports_of(store: &Store, id: WorldId) -> Vec<(String, u16)> {
    store
        .read(|c| store::ports(c, id))
        .unwrap()
        .into_iter()
        .map(|p| (p.service, p.port))
        .collect()
}

#[tokio::test]
async fn a_shared_service_has_its_port_once_and_every_world_resolves_to_it() {
    let h = h();
    let a = up(&h, "a", config());
    let b = up(&h, "b", config());
    converge_all(&h).await;
    let shared = shared_world(&h.store).expect("the project's shared world");
    assert_eq!(
        shared.spec.services.keys().collect::<Vec<_>>(),
        ["mail"],
        "only the shared services"
    );
    let mail_port = ports_of(&h.store, shared.id)[0].1;
    assert_eq!(
        ports_of(&h.store, shared.id),
        [("mail".to_owned(), mail_port)]
    );
    for id in [a, b] {
        let own: Vec<String> = ports_of(&h.store, id).into_iter().map(|p| p.0).collect();
        assert_eq!(
            own,
            ["api"],
            "a world allocated a port of the shared service"
        );
        let seen = h
            .store
            .read(|c| {
                let w = store::world(c, id)?.unwrap();
                store::ports_seen_by(c, &w)
            })
            .unwrap();
        assert!(seen
            .iter()
            .any(|p| p.service == "mail" && p.port == mail_port));
    }
    // One mail process, in the shared world; each world's api sees its port and address.
    assert_eq!(live(&h, "mail"), [shared.id]);
    let sup = h.sup.inner.lock().unwrap();
    let apis: Vec<_> = sup
        .procs
        .values()
        .filter(|p| p.spec.service == "api")
        .collect();
    assert_eq!(apis.len(), 2);
    for api in apis {
        assert_eq!(api.spec.env["MAIL_PORT"], mail_port.to_string());
        assert_eq!(
            api.spec.env["MAIL_URL"],
            format!("http://localhost:{mail_port}")
        );
    }
}

#[tokio::test]
async fn the_shared_world_runs_a_service_only_while_a_running_world_selects_it() {
    let h = h();
    let a = up(&h, "a", config());
    let b = up(&h, "b", config());
    converge_all(&h).await;
    let shared = shared_world(&h.store).unwrap().id;
    let first = h.sup.live("mail");
    assert_eq!(first.len(), 1);
    // One world down: the other still uses it.
    h.store.set_desired_state(a, DesiredState::Stopped).unwrap();
    converge_all(&h).await;
    assert_eq!(h.sup.live("mail"), first, "mail stopped while b uses it");
    // The last user down: it stops, after that world's own processes (the shared world
    // looking first leaves it running while b's api still runs); its port stays.
    let port = ports_of(&h.store, shared);
    h.store.set_desired_state(b, DesiredState::Stopped).unwrap();
    h.converge(shared).await;
    assert_eq!(h.sup.live("mail"), first, "stopped before b's api");
    converge_all(&h).await;
    assert!(h.sup.live("mail").is_empty(), "mail runs for nobody");
    let row = h.row(shared, "mail");
    assert_eq!(row.state, ProcState::Stopped);
    assert!(row.message.contains("no running world"), "{}", row.message);
    let idle = h.ready(shared);
    assert_eq!(idle.reason, "Idle");
    assert_eq!(ports_of(&h.store, shared), port);
    // A world that selects other services only (a group without mail) does not start it.
    let mut front = config();
    front.services.insert("docs".into(), web("serve docs", &[]));
    front.groups.insert("docs".into(), vec!["docs".into()]);
    let mut nw = new_world(h.dir.path(), "a", front);
    nw.group = Some("docs".into());
    h.store.put_world(&nw).unwrap();
    converge_all(&h).await;
    assert!(
        h.sup.live("mail").is_empty(),
        "started for a group without it"
    );
    // b back up: mail starts again, on the port it had.
    up(&h, "b", config());
    converge_all(&h).await;
    assert_eq!(h.sup.live("mail").len(), 1);
    assert_eq!(ports_of(&h.store, shared), port);
}

#[tokio::test]
async fn a_world_waits_for_its_shared_dependency_and_a_queued_world_does_not_start_it() {
    let h = h();
    h.store.set_setting("max_parallel", "1").unwrap();
    h.sup.inner.lock().unwrap().unready.insert("mail".into());
    let a = up(&h, "a", config());
    converge_all(&h).await;
    // The shared world takes no place: a is admitted, and its api waits for mail.
    assert!(crate::hold::held(&h.store, &world(&h.store, a).unwrap())
        .unwrap()
        .is_none());
    assert!(
        h.sup.live("api").is_empty(),
        "api started before mail was ready"
    );
    assert!(h.row(a, "api").message.contains("waiting for mail"));
    let c = h.ready(a);
    assert!(c.message.contains("mail (shared)"), "{}", c.message);
    h.sup.inner.lock().unwrap().unready.clear();
    converge_all(&h).await;
    assert_eq!(h.sup.live("api").len(), 1);
    assert_eq!(h.ready(a).reason, "Ready");
    // b is queued behind a (max_parallel = 1): once a goes down, mail stops though b
    // selects it, until b is admitted.
    let b = up(&h, "b", config());
    converge_all(&h).await;
    assert!(crate::hold::held(&h.store, &world(&h.store, b).unwrap())
        .unwrap()
        .is_some());
    assert_eq!(h.sup.live("mail").len(), 1);
    h.store.set_desired_state(a, DesiredState::Stopped).unwrap();
    for id in [a, shared_world(&h.store).unwrap().id] {
        h.converge(id).await;
    }
    assert!(
        h.sup.live("mail").is_empty(),
        "mail runs for a queued world"
    );
    // b's turn comes at its next reconcile: then mail runs again for it.
    converge_all(&h).await;
    assert_eq!(h.sup.live("mail").len(), 1);
    assert_eq!(h.sup.live("api").len(), 1);
}

#[tokio::test]
async fn the_shared_world_goes_with_the_last_world_that_uses_it_after_its_processes() {
    let h = h();
    let a = up(&h, "a", config());
    let b = up(&h, "b", config());
    converge_all(&h).await;
    let shared = shared_world(&h.store).unwrap();
    h.store.mark_deleted(a, false).unwrap();
    converge_all(&h).await;
    assert!(world(&h.store, a).is_none());
    let still = shared_world(&h.store).unwrap();
    assert!(!still.deleted, "removed while b uses it");
    assert_eq!(h.sup.live("mail").len(), 1);
    // The last user goes: the shared world is marked with it, and torn down only once b
    // is gone (its api stopped before mail).
    h.store.mark_deleted(b, false).unwrap();
    assert!(shared_world(&h.store).unwrap().deleted);
    // The shared world alone: it waits for b.
    h.converge(shared.id).await;
    assert!(
        shared_world(&h.store).is_some(),
        "torn down before its user"
    );
    assert_eq!(h.sup.live("mail").len(), 1);
    converge_all(&h).await;
    assert!(shared_world(&h.store).is_none());
    assert!(world(&h.store, b).is_none());
    assert!(h.sup.live("mail").is_empty() && h.sup.live("api").is_empty());
    assert!(h.store.read(store::all_ports).unwrap().is_empty());
    let stopped = h.sup.inner.lock().unwrap().stopped.clone();
    let pos = |s: &str| stopped.iter().rposition(|x| x == s).unwrap();
    assert!(pos("api") < pos("mail"), "{stopped:?}");
}

#[tokio::test]
async fn a_world_declaring_shared_services_is_refused_while_they_are_being_removed() {
    let h = h();
    let a = up(&h, "a", config());
    converge_all(&h).await;
    h.store.mark_deleted(a, false).unwrap();
    let err = h
        .store
        .put_world(&new_world(h.dir.path(), "b", config()))
        .unwrap_err();
    assert!(
        matches!(err, store::StoreError::SharedBeingRemoved(_)),
        "{err}"
    );
    assert!(err.to_string().contains("acme/@shared"), "{err}");
    // A world without shared services is not held up by them.
    up(&h, "c", spec(vec![("api", web("serve", &[]))]));
    converge_all(&h).await;
    assert!(shared_world(&h.store).is_none());
    up(&h, "b", config());
    assert!(shared_world(&h.store).is_some_and(|s| !s.deleted));
}

#[tokio::test]
async fn each_world_routes_its_own_host_of_a_shared_service_to_the_shared_instance() {
    let h = h();
    let routes = FakeRoutes::default();
    let route = RouteController::new(h.store.clone(), routes.clone());
    let a = up(&h, "a", config());
    let b = up(&h, "b", config());
    converge_all(&h).await;
    let shared = shared_world(&h.store).unwrap();
    for id in [a, b, shared.id] {
        crate::testing::reconcile(&route, &h.store, id).await;
    }
    let port = ports_of(&h.store, shared.id)[0].1;
    for w in ["a", "b"] {
        let r = routes
            .route(&format!("mail.{w}.acme.localhost"))
            .unwrap_or_else(|| panic!("no mail host for {w}"));
        assert_eq!((r.port, r.world.as_str()), (port, w));
        assert_eq!(r.state, crate::store::RouteState::Ready);
    }
    let hosts: BTreeSet<String> = routes
        .published
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .routes
        .keys()
        .cloned()
        .collect();
    assert!(
        hosts.iter().all(|h| !h.contains("shared")),
        "the shared world has hosts of its own: {hosts:?}"
    );
}

#[tokio::test]
async fn another_worlds_up_from_another_shell_does_not_restart_a_shared_service() {
    let h = h();
    let with_env = |name: &str, s: Spec, x: &str| {
        let mut nw = new_world(h.dir.path(), name, s);
        nw.env.insert("FROM_SHELL".into(), x.into());
        h.store.put_world(&nw).unwrap().world.id
    };
    with_env("a", config(), "one");
    converge_all(&h).await;
    let first = h.sup.live("mail");
    // The same definition from another environment: mail keeps running as it was.
    with_env("b", config(), "two");
    converge_all(&h).await;
    assert_eq!(h.sup.live("mail"), first, "restarted for another shell");
    assert_eq!(shared_world(&h.store).unwrap().env["FROM_SHELL"], "one");
    // A changed definition takes its writer's environment, and restarts it.
    let mut changed = config();
    if let crate::spec::ServiceKind::Process(p) =
        &mut changed.services.get_mut("mail").unwrap().kind
    {
        p.cmd = "mailpit --v2".into();
    }
    with_env("b", changed, "two");
    converge_all(&h).await;
    assert_eq!(shared_world(&h.store).unwrap().env["FROM_SHELL"], "two");
    let now = h.sup.live("mail");
    assert_eq!(now.len(), 1);
    assert_ne!(now, first);
}

/// Views of many worlds read every table once (`Observed`); what they read of each world,
/// and what it sees of the shared world, is what the per-world reads give.
#[tokio::test]
async fn every_worlds_rows_read_at_once_are_each_worlds_own_reads() {
    let h = h();
    let a = up(&h, "a", config());
    let b = up(&h, "b", config());
    converge_all(&h).await;
    let shared = shared_world(&h.store).unwrap().id;
    h.store
        .read(|c| {
            let all = store::Observed::read(c)?;
            for id in [a, b, shared] {
                let w = store::world(c, id)?.unwrap();
                let one = store::WorldRows::read(c, id)?;
                let many = all.of(id);
                assert!(!one.processes.is_empty() && !one.conditions.is_empty());
                assert_eq!(
                    format!("{:?}", many.processes),
                    format!("{:?}", one.processes)
                );
                assert_eq!(
                    format!("{:?}", many.conditions),
                    format!("{:?}", one.conditions)
                );
                assert_eq!(many.ports, one.ports);
                assert_eq!(many.generations, one.generations);
                assert_eq!(
                    format!("{:?}", many.worktree),
                    format!("{:?}", one.worktree)
                );
                assert_eq!(many.resources, one.resources);
                assert_eq!(many.bootstrap, one.bootstrap);
                let (seen, alone) = (all.seen_by(&w), store::Seen::read(c, &w, &one)?);
                assert_eq!(seen.ports, alone.ports);
                assert_eq!(seen.ports, store::ports_seen_by(c, &w)?);
                assert_eq!(
                    format!("{:?}", seen.slices),
                    format!("{:?}", store::slices_seen_by(c, &w)?)
                );
                assert_eq!(
                    format!("{:?}", seen.shared_processes),
                    format!("{:?}", store::shared_processes(c, &w)?)
                );
                assert_eq!(
                    format!("{:?}", seen.shared_processes),
                    format!("{:?}", alone.shared_processes)
                );
                if id != shared {
                    assert!(seen.ports.iter().any(|p| p.service == "mail"));
                    assert_eq!(seen.shared_processes.len(), 1, "the shared mail");
                }
            }
            assert!(all.of(9999).processes.is_empty(), "a world without rows");
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn a_world_made_before_its_shared_services_port_waits_for_the_port_not_fails() {
    let h = h();
    let a = up(&h, "a", config());
    // Only a converges: the shared world (made again, as after the last world went) has no
    // port assigned yet, so a's api resolves ${mail.port} to nothing for now.
    h.converge(a).await;
    let row = h.row(a, "api");
    assert_eq!(row.state, ProcState::Pending, "{}", row.message);
    assert!(
        !row.message.contains("resolves to nothing"),
        "a port still coming was taken for one that never will: {}",
        row.message
    );
    assert!(
        h.sup.live("api").is_empty(),
        "api started without its mail port"
    );
    // Once the shared world has its port, the api starts with it.
    converge_all(&h).await;
    let shared = shared_world(&h.store).expect("the project's shared world");
    let mail_port = ports_of(&h.store, shared.id)[0].1;
    let sup = h.sup.inner.lock().unwrap();
    let api = sup
        .procs
        .values()
        .find(|p| p.spec.service == "api" && p.exit.is_none())
        .expect("api runs");
    assert_eq!(api.spec.env["MAIL_PORT"], mail_port.to_string());
}
