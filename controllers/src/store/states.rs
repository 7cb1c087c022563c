//! The `state` columns of the observed tables, as types: each is stored as its word and read
//! back into its enum, so no reader compares strings and a word the code does not know is
//! an error naming the column, not a silent mismatch.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

/// A stored state word that no variant spells.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} state `{word}` in the store (written by a newer binky?)")]
pub struct UnknownState {
    /// Which state.
    pub what: &'static str,
    /// The word found.
    pub word: String,
}

macro_rules! state_enum {
    (
        $(#[$meta:meta])*
        $name:ident ($what:literal) {
            $($(#[$vmeta:meta])* $var:ident = $word:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $var),+
        }

        impl $name {
            /// Every state.
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            /// The word it is stored and shown as.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$var => $word),+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownState;

            fn from_str(word: &str) -> Result<Self, UnknownState> {
                match word {
                    $($word => Ok($name::$var),)+
                    _ => Err(UnknownState { what: $what, word: word.to_owned() }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e: UnknownState| FromSqlError::Other(Box::new(e)))
            }
        }
    };
}

state_enum! {
    /// Where one service's process is in its life.
    ProcState ("process") {
        /// Not running: waiting for its dependencies, an address, or its turn.
        Pending = "pending",
        /// Its `setup` runs (a task to its end, before the first start).
        Setup = "setup",
        /// Started; not ready yet.
        Starting = "starting",
        /// Running and ready.
        Running = "running",
        /// Running, and its health check has failed `retries` times in a row.
        Unhealthy = "unhealthy",
        /// Exited; restarting after a delay.
        Backoff = "backoff",
        /// Finished successfully, not to be restarted (a one-shot).
        Exited = "exited",
        /// Failed, not to be restarted until the next `binky up`.
        Failed = "failed",
        /// Stopped by binky (`down`, `reload`, no longer selected).
        Stopped = "stopped",
    }
}

state_enum! {
    /// Where a world's worktree is.
    WorktreeState ("worktree") {
        /// `git worktree add` runs (the files may not be there yet).
        Creating = "creating",
        /// Checked out: setups and services may use it once the paths they need are brought
        /// (see [`BootstrapState`]).
        Ready = "ready",
        /// Deleted from outside binky: made again only by the next `binky up`.
        Missing = "missing",
        /// Could not be made.
        Failed = "failed",
    }
}

state_enum! {
    /// Where one path a new worktree gets from the main checkout is.
    BootstrapState ("bootstrap") {
        /// To be brought (a daemon that died while bringing it left it so).
        Pending = "pending",
        /// Not brought unless a command that needs it is to run: a world of a `--group`
        /// whose database is cloned from a ready golden template runs no `migrate` of it.
        /// Made pending once the world builds the template or makes its slice the slow
        /// way after all.
        Deferred = "deferred",
        /// Brought: the commands that need it may run.
        Done = "done",
        /// Could not be brought: said in the world's events; its `setup` makes it.
        Failed = "failed",
    }
}

state_enum! {
    /// Where one adapter service's slice is.
    SliceState ("slice") {
        /// Not made yet.
        Provisioning = "provisioning",
        /// To be made again (found dropped from its server).
        Pending = "pending",
        /// Made; waiting for the worktree to run `migrate` and `seed`.
        Provisioned = "provisioned",
        /// `migrate` runs.
        Migrating = "migrating",
        /// `seed` runs.
        Seeding = "seeding",
        /// Made, migrated and seeded.
        Ready = "ready",
        /// Failed for this generation; the next `binky up` tries again.
        Failed = "failed",
        /// Made, and its server of its own stopped with its world (data kept); the next
        /// `binky up` starts it again.
        Stopped = "stopped",
    }
}

state_enum! {
    /// Where a golden template is.
    GoldenState ("golden template") {
        /// Its builder runs provision, migrate, seed and seal.
        Building = "building",
        /// Sealed: worlds are cloned from it.
        Ready = "ready",
        /// Its build failed; the next `binky up` builds again.
        Failed = "failed",
        /// Being dropped (asked, unused for `golden_keep`, or the disk is short); a world
        /// that needs it waits and builds it again.
        Dropping = "dropping",
    }
}

state_enum! {
    /// Where one of the daemon's managed servers is.
    ServerState ("server") {
        /// Being started: its port and admin password are recorded before its data
        /// directory is made, so a daemon killed meanwhile starts it again with them.
        Starting = "starting",
        /// Started and answering.
        Running = "running",
        /// It stopped running on its own; the daemon starts it again.
        Down = "down",
        /// `binky servers stop` stopped it; the next `binky up` starts it.
        Stopped = "stopped",
        /// It could not be started (the message says why).
        Failed = "failed",
    }
}

state_enum! {
    /// Where a world stands at the admission gate.
    AdmissionState ("admission") {
        /// Waiting for its turn, or for room under a resident limit.
        Queued = "queued",
        /// Admitted: its controllers may start things.
        Admitted = "admitted",
        /// Stopped by the gate to make room; it starts again by itself when there is room.
        Cooled = "cooled",
    }
}

state_enum! {
    /// Whether a route's backend should answer.
    RouteState ("route") {
        /// The service is running and ready.
        Ready = "ready",
        /// The service is starting or waiting for its dependencies.
        Starting = "starting",
        /// The service keeps failing.
        Failing = "failing",
        /// The world (or this service) is stopped.
        Stopped = "stopped",
    }
}

impl ProcState {
    /// A process of the service may hold its ports now (so they must not be probed as if
    /// someone else took them).
    pub fn holds_ports(self) -> bool {
        matches!(
            self,
            ProcState::Setup | ProcState::Starting | ProcState::Running | ProcState::Unhealthy
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_as_itself_and_an_unknown_word_is_named() {
        for s in ProcState::ALL {
            assert_eq!(s.as_str().parse::<ProcState>().unwrap(), *s);
        }
        for s in WorktreeState::ALL {
            assert_eq!(s.as_str().parse::<WorktreeState>().unwrap(), *s);
        }
        for s in SliceState::ALL {
            assert_eq!(s.as_str().parse::<SliceState>().unwrap(), *s);
        }
        for s in GoldenState::ALL {
            assert_eq!(s.as_str().parse::<GoldenState>().unwrap(), *s);
        }
        for s in ServerState::ALL {
            assert_eq!(s.as_str().parse::<ServerState>().unwrap(), *s);
        }
        for s in RouteState::ALL {
            assert_eq!(s.as_str().parse::<RouteState>().unwrap(), *s);
        }
        for s in AdmissionState::ALL {
            assert_eq!(s.as_str().parse::<AdmissionState>().unwrap(), *s);
        }
        let err = "zombie".parse::<ProcState>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown process state `zombie` in the store (written by a newer binky?)"
        );
    }

    #[test]
    fn states_round_trip_through_sqlite() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute("CREATE TABLE t (s TEXT)", []).unwrap();
        c.execute("INSERT INTO t VALUES (?1)", [ProcState::Backoff])
            .unwrap();
        let back: ProcState = c.query_row("SELECT s FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(back, ProcState::Backoff);
        c.execute("UPDATE t SET s = 'nonsense'", []).unwrap();
        let bad = c.query_row("SELECT s FROM t", [], |r| r.get::<_, ProcState>(0));
        assert!(bad.is_err());
    }
}
