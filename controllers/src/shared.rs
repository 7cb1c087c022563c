//! Shared services (`shared = true`): one instance of a service (a process, or the slice of
//! an adapter service) for all the worlds of a project.
//!
//! A project's shared services live in a world of their own, [`WORLD`] (`@shared`, a name
//! no user world can have), run by the same controllers as any world: the port controller
//! gives it its ports, the slice controller its slices, the process controller its
//! processes. Its worktree is the repository's main checkout (adopted: never made, never
//! deleted by binky). Commands write it, in the same transaction as the user world they
//! write (`binky up`, `binky apply`, an edit, `binky remove`); controllers alone run it.
//!
//! # Guarantees
//! - One instance per project: every world's `${mail.port}`, `${mail.url}` and `${db.url}`
//!   of a shared service resolve to the shared world's ports and slices, and each world's
//!   URL of it (`mail.<world>.<domain>`) routes to the shared instance.
//! - A shared process runs while some world of the project that selects it (its group
//!   included) is running and admitted (the process controller asks each world), together
//!   with the shared services it depends on; it stops after the last such world goes down
//!   or is removed, once that world's own processes have stopped. Its ports and its slices
//!   stay until the shared world goes.
//! - The shared world goes (its slices torn down) with the last world of the project that
//!   declares shared services, and only after that world's processes are gone.
//! - The shared world takes no place of `max_parallel` and is never cooled on its own.
//!
//! # Caveats
//! - Last writer wins: each shared service runs the definition of the world whose
//!   `binky.toml` was written last (`binky up`, `binky apply`, a saved edit) among those
//!   that declare it; `binky check` warns when a file's definition differs from the one
//!   running. A service no world declares shared any more leaves the shared world.
//! - A shared service runs in the main checkout with the environment of the `binky up`
//!   that made the shared world or last changed a shared definition (another world's
//!   `binky up` from another shell does not restart it), and sees only shared services'
//!   tokens: it cannot depend on one world's service (admission refuses such a
//!   `depends_on`, `binky check` warns of such a token).

use std::collections::{BTreeMap, BTreeSet};

use crate::spec::{Agents, Hooks, Spec};

/// The name of a project's shared world: `@` is never part of a world name a user can give
/// (see [`crate::admission::check_world_name`]).
pub const WORLD: &str = "@shared";

/// The services of `spec` declared `shared = true`.
pub fn declared(spec: &Spec) -> BTreeSet<String> {
    spec.services
        .iter()
        .filter(|(_, s)| s.shared)
        .map(|(n, _)| n.clone())
        .collect()
}

/// The spec of a project's shared world after `writer` (a world's spec being written, if
/// any) is written: the writer's shared services as it defines them, and, of `current`,
/// the services another live world of the project still declares shared (`others`). The
/// project settings are the writer's (else the current ones); no groups, hooks or agents.
pub fn merge(current: Option<&Spec>, writer: Option<&Spec>, others: &BTreeSet<String>) -> Spec {
    let base = writer.or(current);
    let mut services = BTreeMap::new();
    if let Some(cur) = current {
        for (name, svc) in &cur.services {
            if others.contains(name) {
                services.insert(name.clone(), svc.clone());
            }
        }
    }
    if let Some(w) = writer {
        for (name, svc) in &w.services {
            if svc.shared {
                services.insert(name.clone(), svc.clone());
            }
        }
    }
    // File order: the writer's first, then the services kept from the current spec.
    let mut order: Vec<String> = Vec::new();
    let listed = writer.map(Spec::order).unwrap_or_default();
    for name in listed
        .into_iter()
        .chain(current.map(Spec::order).unwrap_or_default())
    {
        if services.contains_key(&name) && !order.contains(&name) {
            order.push(name);
        }
    }
    Spec {
        project: base
            .map(|b| b.project.clone())
            .unwrap_or_else(|| crate::spec::Project {
                name: String::new(),
                domain: None,
                port_range: None,
                https: false,
                copy: Vec::new(),
                copy_modes: Default::default(),
            }),
        services,
        order,
        groups: BTreeMap::new(),
        agents: Agents::default(),
        hooks: Hooks::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{resource, spec, web};

    fn shared(mut s: crate::spec::Service) -> crate::spec::Service {
        s.shared = true;
        s
    }

    #[test]
    fn the_last_writer_defines_each_shared_service_and_undeclared_ones_leave() {
        let a = spec(vec![
            ("mail", shared(web("mailpit v1", &[]))),
            ("db", shared(resource("postgres", None, None))),
            ("api", web("api", &["db"])),
        ]);
        let first = merge(None, Some(&a), &BTreeSet::new());
        assert_eq!(first.services.keys().collect::<Vec<_>>(), ["db", "mail"]);
        assert!(first.groups.is_empty() && first.hooks.post_up.is_none());
        // Another world defines mail its own way and has no shared db.
        let b = spec(vec![("mail", shared(web("mailpit v2", &[])))]);
        let others = BTreeSet::from(["db".to_owned(), "mail".to_owned()]);
        let second = merge(Some(&first), Some(&b), &others);
        assert_eq!(second.services.keys().collect::<Vec<_>>(), ["db", "mail"]);
        assert_eq!(second.services["mail"].process().unwrap().cmd, "mailpit v2");
        // The only world that declared db is gone: db leaves, mail stays as written last.
        let third = merge(Some(&second), None, &BTreeSet::from(["mail".to_owned()]));
        assert_eq!(third.services.keys().collect::<Vec<_>>(), ["mail"]);
        assert_eq!(third.services["mail"].process().unwrap().cmd, "mailpit v2");
    }
}
