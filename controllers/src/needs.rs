//! What an adapter service's `migrate` and `seed` wait for of the world's other slices, and
//! the cycles among golden templates that would make a world wait for ever.
//!
//! `migrate` and `seed` run with the service's environment: each `${other.…}` token in
//! them or in the service's `env` (`[defaults] env` included) needs the slice of `other`
//! made first. A slice with `clone_from` is a copy of its golden template, and that
//! template is built by running the same commands; so a template whose build needs,
//! through such a chain, the slice cloned from itself can never be built.
//!
//! # Guarantees
//! - A token of the service itself (`${db.port}` in `db`'s env, `${self.url}`) is never a
//!   need: while a template is built it is the template's own address, the database being
//!   migrated.
//! - Only adapter services whose slices the world makes count; a process service's ports
//!   are there before any slice, and a slice made without `clone_from` is provisioned
//!   before its own commands run, so neither can close a cycle.
//! - [`first_cycle`] is what `binky check` and every write of a spec refuse; the golden
//!   controller asks [`template_cycle`] when a build waits, so a world written before the
//!   check existed fails saying why instead of waiting for ever.

use std::collections::BTreeSet;

use crate::spec::Spec;
use crate::tokens::{is_binky_token, token_exprs};

/// One thing a service's commands wait for: the slice of `target`, because `field` of
/// `service` uses `token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// The adapter service whose commands need it.
    pub service: String,
    /// Where the token is written: `migrate`, `seed` or `env.NAME`.
    pub field: String,
    /// The token, as written (`${cache.port}`).
    pub token: String,
    /// The adapter service whose slice it names.
    pub target: String,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(var) = self.field.strip_prefix("env.") {
            write!(f, "its env {var} = {}", self.token)
        } else {
            write!(f, "its {} uses {}", self.field, self.token)
        }
    }
}

/// The slices of other adapter services that `service`'s `migrate` and `seed` wait for,
/// in the order written (`makes`: whether the world makes the slice of a service; a
/// service it does not make is no need of this world's). None when it has neither command.
pub fn slice_needs(spec: &Spec, service: &str, makes: &dyn Fn(&str) -> bool) -> Vec<Need> {
    let Some(res) = spec.resource(service) else {
        return Vec::new();
    };
    if res.migrate.is_none() && res.seed.is_none() {
        return Vec::new();
    }
    let fields = [
        ("migrate", res.migrate.as_deref()),
        ("seed", res.seed.as_deref()),
    ]
    .into_iter()
    .filter_map(|(f, v)| v.map(|v| (f.to_owned(), v)))
    .chain(
        res.env
            .iter()
            .map(|(k, v)| (format!("env.{k}"), v.as_str())),
    );
    let mut out: Vec<Need> = Vec::new();
    for (field, text) in fields {
        for expr in token_exprs(text).filter(|e| is_binky_token(e)) {
            let Some((obj, _)) = expr.split_once('.') else {
                continue;
            };
            if obj == "self" || obj == "worktree" || obj == service {
                continue;
            }
            if spec.resource(obj).is_none() || !makes(obj) {
                continue;
            }
            if out.iter().any(|n| n.target == obj && n.field == field) {
                continue;
            }
            out.push(Need {
                service: service.to_owned(),
                field: field.clone(),
                token: format!("${{{expr}}}"),
                target: obj.to_owned(),
            });
        }
    }
    out
}

/// What a command waits for, in words: the slices of `needs` (not made yet), to do `to`.
/// `None` when there is nothing to wait for.
pub fn said(needs: &[Need], to: &str) -> Option<String> {
    let first = needs.first()?;
    let mut targets: Vec<String> = needs.iter().map(|n| format!("`{}`", n.target)).collect();
    targets.dedup();
    Some(format!(
        "waiting for the slice of {} to {to} ({first})",
        targets.join(", ")
    ))
}

/// Golden templates that wait on each other for ever: each link's service builds its
/// template with a command that needs the next link's slice, a copy of that service's own
/// template; the last link needs the first one's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// The needs, from the first service's around to it again.
    pub links: Vec<Need>,
}

impl Cycle {
    /// The chain in words: `db` (env B = ${db2.url}) → `db2` (env A = ${db.url}) → `db`.
    pub fn chain(&self) -> String {
        let mut out: Vec<String> = self
            .links
            .iter()
            .map(|n| format!("`{}` ({})", n.service, describe(n)))
            .collect();
        if let Some(first) = self.links.first() {
            out.push(format!("`{}`", first.service));
        }
        out.join(" → ")
    }

    /// What to change: the variables and commands that close it.
    pub fn fix(&self) -> String {
        let vars: Vec<String> = self
            .links
            .iter()
            .filter_map(|n| n.field.strip_prefix("env.").map(|v| (n, v)))
            .map(|(n, v)| format!("{v} from `{}`", n.service))
            .collect();
        let mut fix = String::new();
        if !vars.is_empty() {
            fix.push_str(&format!(
                "take {} (a variable of [defaults] env is in every service's env, migrate's and seed's too: set it in `env` of the process services that use it instead)",
                vars.join(" or ")
            ));
        }
        if self.links.iter().any(|n| !n.field.starts_with("env.")) {
            if !fix.is_empty() {
                fix.push_str(", or ");
            }
            fix.push_str("keep the other database's token out of migrate and seed");
        }
        let names: Vec<String> = self
            .links
            .iter()
            .map(|n| format!("`{}`", n.service))
            .collect();
        fix.push_str(&format!(
            ", or remove clone_from from one of {}",
            names.join(", ")
        ));
        fix
    }
}

/// `env REDIS_PORT = ${cache.port}`, `migrate uses ${db2.url}`.
fn describe(n: &Need) -> String {
    match n.field.strip_prefix("env.") {
        Some(var) => format!("env {var} = {}", n.token),
        None => format!("{} uses {}", n.field, n.token),
    }
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "golden templates that wait for each other for ever: {} (a template is built by running migrate and seed with its service's env, each `${{other.…}}` there needs that slice, and a slice with clone_from is a copy of its own template)",
            self.chain()
        )
    }
}

/// Does the world make `service`'s slice from its golden template?
fn clones(spec: &Spec, service: &str, makes: &dyn Fn(&str) -> bool) -> bool {
    makes(service)
        && spec
            .resource(service)
            .is_some_and(|r| r.clone_from.is_some())
}

/// The cycle `service`'s golden template is part of, if any: its build needs (through
/// templates of other services with `clone_from`) the slice cloned from itself.
pub fn template_cycle(spec: &Spec, service: &str, makes: &dyn Fn(&str) -> bool) -> Option<Cycle> {
    if !clones(spec, service, makes) {
        return None;
    }
    // Depth first, the path held: a template's needs are few.
    let mut path: Vec<Need> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    find(spec, service, service, makes, &mut path, &mut seen).then_some(Cycle { links: path })
}

fn find(
    spec: &Spec,
    start: &str,
    at: &str,
    makes: &dyn Fn(&str) -> bool,
    path: &mut Vec<Need>,
    seen: &mut BTreeSet<String>,
) -> bool {
    if !seen.insert(at.to_owned()) {
        return false;
    }
    for need in slice_needs(spec, at, makes) {
        if !clones(spec, &need.target, makes) {
            continue;
        }
        let target = need.target.clone();
        path.push(need);
        if target == start || find(spec, start, &target, makes, path, seen) {
            return true;
        }
        path.pop();
    }
    false
}

/// The first cycle among the golden templates of the services the world makes, in name
/// order.
pub fn first_cycle(spec: &Spec, makes: &dyn Fn(&str) -> bool) -> Option<Cycle> {
    spec.services
        .keys()
        .find_map(|name| template_cycle(spec, name, makes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Service;
    use crate::testing::{resource, spec, web};

    fn cloning(migrate: &str, env: &[(&str, &str)]) -> Service {
        let mut s = resource("postgres", Some(migrate), None);
        if let crate::spec::ServiceKind::Resource(r) = &mut s.kind {
            r.clone_from = Some("golden".into());
            r.env = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        }
        s
    }

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn its_own_tokens_a_plain_slice_and_a_process_are_no_cycle() {
        // The world: [defaults] env names db and cache in every service's env.
        let defaults = [("DB_PORT", "${db.port}"), ("REDIS_PORT", "${cache.port}")];
        let mut cache = resource("redis", None, None);
        if let crate::spec::ServiceKind::Resource(r) = &mut cache.kind {
            r.env = defaults
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        }
        let s = spec(vec![
            ("db", cloning("echo migrated ${self.url}", &defaults)),
            ("cache", cache),
            ("api", web("x", &["db"])),
        ]);
        assert_eq!(first_cycle(&s, &all), None);
        let needs = slice_needs(&s, "db", &all);
        assert_eq!(
            needs
                .iter()
                .map(|n| (n.field.as_str(), n.target.as_str()))
                .collect::<Vec<_>>(),
            [("env.REDIS_PORT", "cache")]
        );
        // A world that does not make the cache's slice (a shared one) needs none of it.
        assert!(slice_needs(&s, "db", &|n| n != "cache").is_empty());
    }

    #[test]
    fn two_cloned_databases_naming_each_other_are_a_cycle_named_with_its_fix() {
        // Through env, as [defaults] env puts it in each.
        let s = spec(vec![
            ("db", cloning("echo a", &[("B", "${db2.url}")])),
            ("db2", cloning("echo b", &[("A", "${db.url}")])),
        ]);
        let c = first_cycle(&s, &all).expect("a cycle");
        assert_eq!(
            c.chain(),
            "`db` (env B = ${db2.url}) → `db2` (env A = ${db.url}) → `db`"
        );
        assert!(
            c.fix().contains("take B from `db` or A from `db2`"),
            "{}",
            c.fix()
        );
        // Through a migrate command, one way round.
        let s = spec(vec![
            ("db", cloning("psql ${db2.url} -f x.sql", &[])),
            ("db2", cloning("echo b", &[("A", "${db.url}")])),
        ]);
        let c = template_cycle(&s, "db2", &all).expect("a cycle");
        assert_eq!(
            c.chain(),
            "`db2` (env A = ${db.url}) → `db` (migrate uses ${db2.url}) → `db2`"
        );
        assert!(c.fix().contains("out of migrate and seed"), "{}", c.fix());
        // One way only: db2's template first, then db's. No cycle.
        let s = spec(vec![
            ("db", cloning("psql ${db2.url} -f x.sql", &[])),
            ("db2", cloning("echo b", &[])),
        ]);
        assert_eq!(first_cycle(&s, &all), None);
        // Three round, through a seed.
        let mut db3 = cloning("echo c", &[]);
        if let crate::spec::ServiceKind::Resource(r) = &mut db3.kind {
            r.seed = Some("load ${db.url}".into());
        }
        let s = spec(vec![
            ("db", cloning("echo ${db2.url}", &[])),
            ("db2", cloning("echo ${db3.url}", &[])),
            ("db3", db3),
        ]);
        let c = first_cycle(&s, &all).expect("a cycle");
        assert_eq!(c.links.len(), 3, "{}", c.chain());
        assert!(
            c.chain().contains("`db3` (seed uses ${db.url})"),
            "{}",
            c.chain()
        );
        // Without clone_from on one of them, its slice waits for no template.
        let mut plain = resource("postgres", Some("echo ${db.url}"), None);
        if let crate::spec::ServiceKind::Resource(r) = &mut plain.kind {
            r.clone_from = None;
        }
        let s = spec(vec![
            ("db", cloning("echo ${db2.url}", &[])),
            ("db2", plain),
        ]);
        assert_eq!(first_cycle(&s, &all), None);
    }
}
