//! binky's controllers and condition reporters, named in one place, with the order the daemon
//! registers them in and the order they tear a removed world down in.
//!
//! The names are keys in the store (a controller's finalizer, its `controller_status` row,
//! the `controller` column of its conditions), and the condition types are what `binky up`
//! waits for: every part of binky that needs them reads them here, so no controller module
//! imports another for its name.
//!
//! # Guarantees
//! - [`Kind::ALL`] lists every controller the daemon runs, in the order it registers them.
//! - A controller's `cleanup` runs only once every controller in its
//!   [`Kind::teardown_after`] has dropped its finalizer: the runtime, not each controller,
//!   keeps that order (nothing is removed under a running process).

/// One of binky's controllers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The admission gate: approvals and resident limits.
    Admission,
    /// A git worktree per world.
    Worktree,
    /// A port for every service that asks.
    Port,
    /// One golden template per `clone_from` key.
    Golden,
    /// Each adapter service's slice of a shared server.
    Slice,
    /// The world's processes.
    Process,
    /// The proxy's routes.
    Route,
}

impl Kind {
    /// Every controller, in the order the daemon registers them.
    pub const ALL: [Kind; 7] = [
        Kind::Admission,
        Kind::Worktree,
        Kind::Port,
        Kind::Process,
        Kind::Route,
        Kind::Slice,
        Kind::Golden,
    ];

    /// Its name: the finalizer it holds and the `controller` column it writes.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Admission => "admission",
            Kind::Worktree => "worktree",
            Kind::Port => "port",
            Kind::Golden => "golden",
            Kind::Slice => "slice",
            Kind::Process => "process",
            Kind::Route => "route",
        }
    }

    /// The condition it reports (its errors are reported on it too).
    pub const fn condition(self) -> &'static str {
        match self {
            Kind::Admission => "Admitted",
            Kind::Worktree => "WorktreeReady",
            Kind::Port => "PortsReady",
            Kind::Golden => "GoldensReady",
            Kind::Slice => "SlicesReady",
            Kind::Process => "ServicesReady",
            Kind::Route => "RoutesReady",
        }
    }

    /// The controllers whose part of a removed world must be gone before this one tears
    /// its own down: the worktree, the ports and the slices stay until no process of the
    /// world runs (a process may hold its port, write its files, be connected to its
    /// database).
    pub const fn teardown_after(self) -> &'static [Kind] {
        match self {
            Kind::Worktree | Kind::Port | Kind::Slice => &[Kind::Process],
            Kind::Admission | Kind::Golden | Kind::Process | Kind::Route => &[],
        }
    }

    /// The controller of this name.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Who reports a condition that no controller owns. The runtime writes every condition;
/// these report theirs through [`crate::runtime::set_condition`], each under its own name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporter {
    /// Reading `binky.toml` (`binky up`, `binky apply`, the daemon's config watcher):
    /// `ConfigValid`.
    Config,
    /// The daemon's file watcher: `FilesWatched`.
    Watch,
}

impl Reporter {
    /// The name stored as the condition's controller.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reporter::Config => "config",
            Reporter::Watch => "watch",
        }
    }

    /// The condition it reports.
    pub const fn condition(self) -> &'static str {
        match self {
            Reporter::Config => "ConfigValid",
            Reporter::Watch => "FilesWatched",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/architecture.md's controller table is this registry: a controller, condition,
    /// table or teardown edge changed here and not there fails.
    #[test]
    fn the_architecture_page_lists_each_controller_its_condition_tables_and_teardown() {
        let page = include_str!("../../docs/architecture.md");
        let rows: Vec<&str> = page
            .lines()
            .filter(|l| {
                Kind::ALL
                    .iter()
                    .any(|k| l.starts_with(&format!("| {} |", k.name())))
            })
            .collect();
        assert_eq!(rows.len(), Kind::ALL.len(), "{rows:#?}");
        for k in Kind::ALL {
            let row = rows
                .iter()
                .find(|l| l.starts_with(&format!("| {} | `{}` |", k.name(), k.condition())))
                .unwrap_or_else(|| panic!("no row for {} with `{}`", k.name(), k.condition()));
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let owner = match k {
                Kind::Admission => "Gate".to_owned(),
                _ => format!("{k:?}"),
            };
            let (_, _, grants) = crate::store::owner::ALL
                .iter()
                .find(|(ty, _, _)| *ty == owner)
                .expect("each controller is an owner");
            for g in grants.iter() {
                assert!(
                    cells[3].contains(&format!("`{}`", g.table)),
                    "{}: the page does not say it writes `{}`",
                    k.name(),
                    g.table
                );
            }
            let after: Vec<&str> = k.teardown_after().iter().map(|a| a.name()).collect();
            let want = if after.is_empty() {
                "—".to_owned()
            } else {
                after.join(", ")
            };
            assert_eq!(cells[4], want, "{}: teardown order", k.name());
        }
    }

    #[test]
    fn names_and_conditions_are_unique_and_found_by_name() {
        let mut names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        let mut conds: Vec<&str> = Kind::ALL.iter().map(|k| k.condition()).collect();
        names.sort();
        names.dedup();
        conds.sort();
        conds.dedup();
        assert_eq!(names.len(), Kind::ALL.len());
        assert_eq!(conds.len(), Kind::ALL.len());
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
        assert_eq!(Kind::from_name("fake"), None);
    }

    #[test]
    fn teardown_order_has_no_cycle_and_nothing_waits_on_itself() {
        for k in Kind::ALL {
            for after in k.teardown_after() {
                assert_ne!(*after, k);
                assert!(
                    !after.teardown_after().contains(&k),
                    "{k:?} and {after:?} wait for each other"
                );
            }
        }
    }
}
