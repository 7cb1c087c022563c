//! `replicas = N`: each replica's ports, process, readiness and restarts of its own.

use super::process::h;
use crate::spec::{Service, ServiceKind};
use crate::store::{self, ProcState, Store};
use crate::testing::*;

/// `svc` with `replicas = n`.
fn replicated(mut svc: Service, n: u32) -> Service {
    if let ServiceKind::Process(p) = &mut svc.kind {
        p.replicas = n;
    }
    svc
}

fn ports(store: &Store, id: i64) -> Vec<(String, String, u16)> {
    store
        .read(|c| store::ports(c, id))
        .unwrap()
        .into_iter()
        .map(|p| (p.service, p.label, p.port))
        .collect()
}

#[tokio::test]
async fn each_replica_has_ports_of_its_own_kept_across_passes_and_released_when_dropped() {
    let h = h();
    let mut api = replicated(web("api", &[]), 3);
    if let ServiceKind::Process(p) = &mut api.kind {
        p.ports = Some(vec!["http".into(), "grpc".into()]);
    }
    let mut s = spec(vec![("api", api), ("web", web("web", &[]))]);
    let id = h.up(s.clone());
    crate::testing::reconcile(&h.port, &h.store, id).await;
    let first = ports(&h.store, id);
    let names: Vec<(&str, &str)> = first
        .iter()
        .map(|(s, l, _)| (s.as_str(), l.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("api", "grpc"),
            ("api", "http"),
            ("api.1", "grpc"),
            ("api.1", "http"),
            ("api.2", "grpc"),
            ("api.2", "http"),
            ("web", ""),
        ]
    );
    let mut all: Vec<u16> = first.iter().map(|(_, _, p)| *p).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 7, "a port handed out twice: {first:?}");
    // Another pass, and a `binky up` of the same spec: nothing moves.
    crate::testing::reconcile(&h.port, &h.store, id).await;
    h.up(s.clone());
    crate::testing::reconcile(&h.port, &h.store, id).await;
    assert_eq!(ports(&h.store, id), first);
    // Two replicas now: the third one's ports go, the others stay where they were.
    if let ServiceKind::Process(p) = &mut s.services.get_mut("api").unwrap().kind {
        p.replicas = 2;
    }
    h.up(s);
    crate::testing::reconcile(&h.port, &h.store, id).await;
    let now = ports(&h.store, id);
    assert_eq!(
        now,
        first
            .iter()
            .filter(|(s, _, _)| s != "api.2")
            .cloned()
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn replicas_run_apart_and_a_dependent_waits_for_every_one() {
    let h = h();
    let mut api = replicated(web("serve api", &[]), 3);
    if let ServiceKind::Process(p) = &mut api.kind {
        p.setup = Some("make deps".into());
    }
    let s = spec(vec![("api", api), ("web", web("serve web", &["api"]))]);
    h.sup.inner.lock().unwrap().unready.insert("api.2".into());
    let id = h.up(s);
    h.converge(id).await;
    // Setup ran once (in replica 0), then each replica started with its own port.
    assert_eq!(
        h.sup.inner.lock().unwrap().runs.len(),
        1,
        "setup per replica"
    );
    let spawned: Vec<_> = {
        let sup = h.sup.inner.lock().unwrap();
        sup.procs.values().map(|p| p.spec.clone()).collect()
    };
    let port_of = |svc: &str| {
        spawned
            .iter()
            .find(|s| s.service == svc)
            .unwrap_or_else(|| panic!("{svc} never started"))
            .env
            .clone()
    };
    let assigned = ports(&h.store, id);
    let mut seen = Vec::new();
    for (i, name) in ["api", "api.1", "api.2"].iter().enumerate() {
        let env = port_of(name);
        assert_eq!(env["BINKY_REPLICA"], i.to_string(), "{name}");
        let own = assigned.iter().find(|(s, _, _)| s == name).unwrap().2;
        assert_eq!(
            env["PORT"],
            own.to_string(),
            "{name} runs on another's port"
        );
        seen.push(own);
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "replicas share a port: {seen:?}");
    // web waits while one replica of api is not ready.
    assert!(
        h.sup.live("web").is_empty(),
        "web started before api.2 was ready"
    );
    assert!(h.row(id, "web").message.contains("waiting for api"));
    assert_eq!(h.row(id, "api.2").state, ProcState::Starting);
    h.sup.inner.lock().unwrap().unready.clear();
    h.converge(id).await;
    assert_eq!(h.sup.live("web").len(), 1);
    assert_eq!(h.ready(id).message, "2 service(s) ready");
    // One replica dies: it alone is restarted; the others keep their processes.
    let before: Vec<_> = ["api", "api.2"].iter().map(|n| h.sup.live(n)).collect();
    h.sup.exit("api.1", 1);
    crate::testing::reconcile(&h.proc_, &h.store, id).await;
    assert_eq!(h.row(id, "api.1").state, ProcState::Backoff);
    assert_eq!(h.row(id, "api").state, ProcState::Running);
    let after: Vec<_> = ["api", "api.2"].iter().map(|n| h.sup.live(n)).collect();
    assert_eq!(before, after);
}

#[tokio::test]
async fn the_route_of_a_replicated_service_balances_over_its_ready_replicas() {
    let h = h();
    let routes = FakeRoutes::default();
    let route = crate::route::RouteController::new(h.store.clone(), routes.clone());
    let s = spec(vec![("api", replicated(web("serve", &[]), 3))]);
    h.sup.inner.lock().unwrap().unready.insert("api.1".into());
    let id = h.up(s);
    h.converge(id).await;
    crate::testing::reconcile(&route, &h.store, id).await;
    let port = |svc: &str| {
        ports(&h.store, id)
            .into_iter()
            .find(|(s, _, _)| s == svc)
            .unwrap()
            .2
    };
    let r = routes.route("api.w.acme.localhost").expect("routed");
    assert_eq!(r.port, port("api"));
    assert_eq!(
        r.backends,
        [port("api"), port("api.2")],
        "api.1 is not ready"
    );
    assert_eq!(r.state, crate::store::RouteState::Ready);
    // Every replica ready: all three; replica 0 gone: the URL still answers through the
    // others.
    h.sup.inner.lock().unwrap().unready.clear();
    h.converge(id).await;
    crate::testing::reconcile(&route, &h.store, id).await;
    let r = routes.route("api.w.acme.localhost").unwrap();
    assert_eq!(r.backends, [port("api"), port("api.1"), port("api.2")]);
    h.sup.exit("api", 1);
    crate::testing::reconcile(&h.proc_, &h.store, id).await;
    crate::testing::reconcile(&route, &h.store, id).await;
    let r = routes.route("api.w.acme.localhost").unwrap();
    assert_eq!(r.backends, [port("api.1"), port("api.2")]);
    assert_eq!(r.state, crate::store::RouteState::Ready);
    // A service with one replica has no backends list: its port is the backend.
    let one = h
        .store
        .put_world(&new_world(
            h.dir.path(),
            "solo",
            spec(vec![("api", web("serve", &[]))]),
        ))
        .unwrap()
        .world
        .id;
    h.converge(one).await;
    crate::testing::reconcile(&route, &h.store, one).await;
    let r = routes.route("api.solo.acme.localhost").unwrap();
    assert!(r.backends.is_empty());
    assert_eq!(r.state, crate::store::RouteState::Ready);
}
