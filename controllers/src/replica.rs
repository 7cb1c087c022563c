//! A process service's replicas (`replicas = N`) and the names of their instances.
//!
//! Each replica of a service is an *instance*: its own process, process row, ports, log
//! and health check. Replica 0 carries the service's own name (`api`), so a service with
//! `replicas = 1` is named, ported and logged exactly as before; replica `i > 0` is
//! `api.i`. A `.` is never part of a service name (nor of a port label), so an instance
//! name can never be taken for another service.
//!
//! # Guarantees
//! - [`instance`] and [`split`] are inverse: `split(&instance(s, i)) == (s, i)`.
//! - `${api.port}` and `${api.url}` seen from other services are replica 0's; each replica
//!   sees its own `${self.port}` and `PORT`, and `BINKY_REPLICA=<i>` when there are more
//!   than one.

use crate::spec::Spec;

/// The instance name of replica `replica` of `service`: `api`, `api.1`, `api.2`, …
pub fn instance(service: &str, replica: u32) -> String {
    if replica == 0 {
        service.to_owned()
    } else {
        format!("{service}.{replica}")
    }
}

/// `api.2` → `("api", 2)`; a service's own name is its replica 0.
pub fn split(instance: &str) -> (&str, u32) {
    match instance.rsplit_once('.') {
        Some((service, n)) if !service.is_empty() => match n.parse::<u32>() {
            Ok(i) if i > 0 && n == i.to_string() => (service, i),
            _ => (instance, 0),
        },
        _ => (instance, 0),
    }
}

/// The service an instance name belongs to.
pub fn service_of(instance: &str) -> &str {
    split(instance).0
}

impl Spec {
    /// How many replicas `service` runs: `replicas` of a process service, else 1.
    pub fn replicas(&self, service: &str) -> u32 {
        self.services
            .get(service)
            .and_then(|s| s.process())
            .map_or(1, |p| p.replicas.max(1))
    }

    /// The instance names of `service`, replica 0 first.
    pub fn instances(&self, service: &str) -> Vec<String> {
        (0..self.replicas(service))
            .map(|i| instance(service, i))
            .collect()
    }

    /// Is `name` an instance this spec runs (a service's, with a replica index below its
    /// `replicas`)?
    pub fn has_instance(&self, name: &str) -> bool {
        let (service, i) = split(name);
        self.services.contains_key(service) && i < self.replicas(service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_round_trip_and_replica_zero_is_the_service() {
        assert_eq!(instance("api", 0), "api");
        assert_eq!(instance("api", 2), "api.2");
        for (s, i) in [("api", 0), ("api", 1), ("web-ui", 12), ("a_b", 3)] {
            assert_eq!(split(&instance(s, i)), (s, i));
        }
        // Nothing that is not written by `instance` reads as a replica.
        assert_eq!(split("api.0"), ("api.0", 0));
        assert_eq!(split("api.01"), ("api.01", 0));
        assert_eq!(split("api.x"), ("api.x", 0));
        assert_eq!(split(".3"), (".3", 0));
        assert_eq!(service_of("hook:post_up"), "hook:post_up");
    }

    #[test]
    fn a_spec_lists_the_instances_of_its_services() {
        let mut api = crate::testing::web("serve", &[]);
        if let crate::spec::ServiceKind::Process(p) = &mut api.kind {
            p.replicas = 3;
        }
        let s = crate::testing::spec(vec![
            ("api", api),
            ("web", crate::testing::web("serve", &[])),
            ("db", crate::testing::resource("postgres", None, None)),
        ]);
        assert_eq!(s.instances("api"), ["api", "api.1", "api.2"]);
        assert_eq!(s.instances("web"), ["web"]);
        assert_eq!(s.instances("db"), ["db"]);
        assert!(s.has_instance("api.2") && !s.has_instance("api.3"));
        assert!(s.has_instance("web") && !s.has_instance("web.1"));
        assert!(!s.has_instance("gone"));
    }
}
