//! `isolation = "database"` (the default with an `admin_url`): a logical database of the
//! shared server per world, with an ACL user of the world's own pinned to it.
//!
//! A slice `bk_acme_w_cache` is database `N` of the server and an ACL user of the same
//! name whose password is the slice's secret: `${cache.url}` is
//! `redis://bk_acme_w_cache:<secret>@host:port/N`. Inside its database a world uses Redis
//! the ordinary way: any key, `SCAN`, `KEYS`, `DBSIZE`, `FLUSHDB`, `INFO`, `SORT`, scripts,
//! pub/sub.
//!
//! # Which database
//! `N` is chosen from 1 to `CONFIG GET databases` − 1, never the admin URL's own database,
//! and kept: it is recorded with the slice in binky's store (`${cache.database}`), so a
//! restarted daemon, or a server restarted without its ACL file, gives the world the same
//! database again. A new slice gets the lowest database that no slice in the store has,
//! no `bk_` user on the server is pinned to (another binky home may share the server), and
//! that holds no keys (someone else's data), and that binky's catalog on the server
//! ([`super::catalog`], `binky:databases`) gives no other slice. The choice is claimed in
//! that catalog (`HSETNX`) before the user is made, so two homes' daemons provisioning at
//! once never get the same one (the loser chooses again); within one daemon, choosing and
//! creating the user also happen under one lock per server. When
//! none is left the error names the fixes: raise `databases` in the server's
//! configuration, use `options = { isolation = "prefix" }`, or leave out `admin_url` so
//! that binky runs a server for each world.
//!
//! # The ACL user
//! `~* &*` (every key and channel) and `+@all -@admin`, then [`denied`]: the commands that
//! reach into another database or show other worlds' connections, each with its reason;
//! [`super::prefix::ALLOWED_BACK`] re-allows the own-connection subcommands client libraries
//! send, and `+select|N` the `SELECT` of its own database (clients send it on connecting).
//!
//! # Guarantees
//! - A world's user can neither read, write, move nor flush a key of another database:
//!   `SELECT` of another database, `MOVE`, `COPY` (its `DB` option), `SWAPDB`, `MIGRATE`
//!   and `FLUSHALL` answer `NOPERM`, in scripts too.
//! - Teardown deletes the user (the server drops its connections), then empties its
//!   database (`FLUSHDB`), unless another `bk_` user is pinned to it.
//! - A slice made with the prefix mode (by an older binky, or before `isolation = "prefix"`
//!   was dropped) moves to a database of its own at its next provision, and its keys under
//!   the old prefix are removed then: nothing of it is left in the shared database.
//!
//! # Caveats
//! - Pub/sub channels are server-wide in this mode: every world's user may publish and
//!   subscribe to any channel, and `PUBSUB CHANNELS` lists them all. Celery (kombu) names
//!   its channels after the database (`/3.celery.pidbox`), so two worlds' workers do not
//!   hear each other; an app's own channel names should not collide between worlds.
//! - `INFO` is allowed: its `keyspace` and `clients` sections show how many keys the other
//!   databases hold and how many clients are connected.
//! - A new connection is in database 0 until its client sends `SELECT N` (every client
//!   given `${cache.url}` does). A process that ignores the database of its URL therefore
//!   works in database 0, which every world's user can reach: binky never gives database 0
//!   (nor the admin URL's) to a world, so nothing of a world lives there.
//! - `COPY` is refused as a whole (Redis' ACLs cannot refuse only its `DB` option), and so
//!   are `FUNCTION` (one library namespace for the whole server) and `CLIENT TRACKING`.

use std::collections::{BTreeMap, BTreeSet};

/// Commands a world's user may not run, on top of `-@admin`, and why. Commands the server
/// already files under `@admin` are listed again when they cross databases, so a server
/// that categorises them differently still refuses them. Entries the server does not know
/// are left out of the rule.
pub const DENIED: &[(&str, &str)] = &[
    // Across databases.
    ("flushall", "empties every world's database"),
    ("swapdb", "swaps two worlds' databases"),
    (
        "select",
        "moves the connection to another world's database (`+select|N` re-allows its own)",
    ),
    ("move", "moves a key into another world's database"),
    (
        "copy",
        "COPY … DB n writes into another world's database (ACLs cannot refuse the option alone)",
    ),
    (
        "migrate",
        "writes keys into another database of this or another server",
    ),
    // Other worlds' connections and commands.
    ("monitor", "streams every world's commands"),
    (
        "client",
        "CLIENT LIST/KILL/PAUSE see or stop other worlds' connections, and CLIENT TRACKING \
         BCAST streams the modified key names of every database (own-connection subcommands \
         re-allowed)",
    ),
    (
        "slowlog",
        "shows other worlds' commands with their arguments",
    ),
    ("latency", "server-wide diagnostics (@admin)"),
    (
        "function",
        "one library namespace for the whole server: FUNCTION LOAD/DELETE/FLUSH/RESTORE \
         change other worlds' functions",
    ),
    (
        "script",
        "SCRIPT FLUSH empties every world's script cache, SCRIPT KILL stops another world's \
         script (LOAD/EXISTS re-allowed)",
    ),
    // Server administration (already @admin).
    (
        "acl",
        "ACL LIST/GETUSER/SETUSER/LOG show or change other users (WHOAMI/CAT/GENPASS re-allowed)",
    ),
    ("cluster", "server-wide"),
    // And the rest of the server's administration: [`super::SERVER_ADMIN`].
];

/// Every command a database user may not run, with why: [`DENIED`] and
/// [`super::SERVER_ADMIN`].
pub fn denied() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    DENIED.iter().chain(super::SERVER_ADMIN)
}

/// Every command name [`acl_rules`] may mention, for asking the server which it knows.
pub(super) fn mentioned() -> Vec<&'static str> {
    denied()
        .map(|(c, _)| *c)
        .chain(super::prefix::ALLOWED_BACK.iter().copied())
        .collect()
}

/// The `ACL SETUSER <name>` rules of a world's user confined to database `db`, whose
/// password is `secret`; `known` says whether the server has a command.
pub fn acl_rules(secret: &str, db: i64, known: impl Fn(&str) -> bool) -> Vec<String> {
    let head = vec![
        // `reset` first: whatever the user had (drift, another mode's rule) is gone.
        "reset".to_owned(),
        "on".to_owned(),
        // The password as its SHA-256, so the plain text is never part of the command.
        format!("#{}", super::sha256_hex(secret)),
        "allkeys".to_owned(),
        "allchannels".to_owned(),
        "+@all".to_owned(),
        "-@admin".to_owned(),
    ];
    super::prefix::acl_rules_from(
        head,
        denied().map(|(c, _)| *c),
        super::prefix::ALLOWED_BACK
            .iter()
            .copied()
            // MEMORY is not denied here: re-allowing its subcommands would add nothing.
            .filter(|c| !c.starts_with("memory|")),
        db,
        known,
    )
}

/// The database a user's rules pin it to (`+select|N`), if they do and allow every key (a
/// `prefix` user has a key pattern and is pinned to the admin URL's database).
pub(super) fn pinned(rules: &[String]) -> Option<i64> {
    let all_keys = rules.iter().any(|r| r == "~*" || r == "allkeys");
    if !all_keys {
        return None;
    }
    rules
        .iter()
        .find_map(|r| r.strip_prefix("+select|")?.parse().ok())
}

/// What the choice of a world's database looks at.
#[derive(Clone, Debug, Default)]
pub(super) struct Claims {
    /// The database recorded with this slice in binky's store, if any.
    pub(super) recorded: Option<i64>,
    /// The databases recorded with the other slices on this server.
    pub(super) others_recorded: BTreeSet<i64>,
    /// The `bk_` users on the server pinned to a database, by name (this slice's included).
    pub(super) users: BTreeMap<String, i64>,
    /// The slice binky's catalog on the server says holds each database (any home's; see
    /// [`super::catalog`]).
    pub(super) catalog: BTreeMap<i64, String>,
    /// The databases that hold keys.
    pub(super) with_keys: BTreeSet<i64>,
    /// How many databases the server has.
    pub(super) databases: i64,
    /// The admin URL's own database.
    pub(super) admin_db: i64,
}

/// Why no database could be chosen: every candidate is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Full {
    /// Databases held by worlds (recorded or pinned users).
    pub(super) by_worlds: usize,
    /// Databases holding someone else's keys.
    pub(super) by_others: usize,
    /// How many databases the server has.
    pub(super) databases: i64,
}

impl Claims {
    /// The database of `slice`: the one recorded for it, unless another world's user took
    /// it; else the one its user on the server is pinned to; else the lowest free one.
    pub(super) fn choose(&self, slice: &str) -> Result<i64, Full> {
        let pinned_by_other = |db: i64| {
            self.users
                .iter()
                .any(|(user, pin)| user != slice && *pin == db)
                || self.catalog.get(&db).is_some_and(|holder| holder != slice)
        };
        let usable = |db: i64| db > 0 && db < self.databases && db != self.admin_db;
        if let Some(db) = self
            .recorded
            .filter(|db| usable(*db) && !pinned_by_other(*db))
        {
            return Ok(db);
        }
        if let Some(db) =
            self.users.get(slice).copied().filter(|db| {
                usable(*db) && !pinned_by_other(*db) && !self.others_recorded.contains(db)
            })
        {
            return Ok(db);
        }
        let by_worlds: BTreeSet<i64> = self
            .others_recorded
            .iter()
            .copied()
            .chain(
                self.users
                    .iter()
                    .filter(|(u, _)| u.as_str() != slice)
                    .map(|(_, db)| *db),
            )
            .chain(
                self.catalog
                    .iter()
                    .filter(|(_, holder)| holder.as_str() != slice)
                    .map(|(db, _)| *db),
            )
            .collect();
        (1..self.databases)
            .filter(|db| *db != self.admin_db)
            .find(|db| !by_worlds.contains(db) && !self.with_keys.contains(db))
            .ok_or_else(|| Full {
                by_worlds: by_worlds.iter().filter(|db| usable(**db)).count(),
                by_others: self
                    .with_keys
                    .iter()
                    .filter(|db| usable(**db) && !by_worlds.contains(db))
                    .count(),
                databases: self.databases,
            })
    }
}

/// The error for a server with no database left, naming the fixes.
pub(super) fn full_error(shown: &str, full: &Full) -> String {
    let others = if full.by_others > 0 {
        format!(", {} hold other data", full.by_others)
    } else {
        String::new()
    };
    format!(
        "no free database on {shown} for another world: it has {} databases (0 and the \
         admin_url's are never given to a world), {} are worlds'{others}. Raise \
         `databases` in the server's configuration (redis.conf, then restart it), or give \
         the service `options = {{ isolation = \"prefix\" }}` (a key prefix per world on one \
         database), or leave out admin_url so that binky runs a redis-server for each world",
        full.databases, full.by_worlds
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::assert_denied_after_all;
    use super::*;

    fn claims() -> Claims {
        Claims {
            databases: 16,
            ..Claims::default()
        }
    }

    #[test]
    fn a_new_slice_gets_the_lowest_database_nobody_holds() {
        let mut c = claims();
        assert_eq!(c.choose("bk_a"), Ok(1));
        c.others_recorded = [1, 2].into();
        c.users = [("bk_x".to_owned(), 3)].into();
        c.with_keys = [4].into();
        c.admin_db = 5;
        assert_eq!(c.choose("bk_a"), Ok(6));
    }

    #[test]
    fn a_slice_keeps_its_database() {
        let mut c = claims();
        c.recorded = Some(7);
        c.with_keys = [7].into();
        assert_eq!(c.choose("bk_a"), Ok(7), "its own keys do not make it taken");
        // Lost from the store (gc, a new home): the server's pin says which.
        c.recorded = None;
        c.users = [("bk_a".to_owned(), 7)].into();
        assert_eq!(c.choose("bk_a"), Ok(7));
        // Recorded, but another world's user holds it now: a new one.
        c.recorded = Some(7);
        c.users = [("bk_b".to_owned(), 7)].into();
        c.with_keys = [].into();
        assert_eq!(c.choose("bk_a"), Ok(1));
    }

    #[test]
    fn a_database_the_catalog_gives_another_homes_slice_is_never_chosen() {
        let mut c = claims();
        // Another home claimed 1 a moment ago: its user is not on the server yet.
        c.catalog = [(1, "bk_q7r2s3t4_team_feat_a_cache".to_owned())].into();
        assert_eq!(c.choose("bk_h2k4m6p7_team_feat_a_cache"), Ok(2));
        // Its own entry is no obstacle; a recorded database another slice holds is left.
        c.catalog
            .insert(2, "bk_h2k4m6p7_team_feat_a_cache".to_owned());
        assert_eq!(c.choose("bk_h2k4m6p7_team_feat_a_cache"), Ok(2));
        c.recorded = Some(1);
        assert_eq!(c.choose("bk_h2k4m6p7_team_feat_a_cache"), Ok(2));
    }

    #[test]
    fn a_full_server_says_how_many_are_taken_and_how_to_fix_it() {
        let mut c = Claims {
            databases: 4,
            admin_db: 0,
            ..Claims::default()
        };
        c.others_recorded = [1, 2].into();
        c.with_keys = [3].into();
        let full = c.choose("bk_a").expect_err("full");
        assert_eq!(
            full,
            Full {
                by_worlds: 2,
                by_others: 1,
                databases: 4
            }
        );
        let msg = full_error("redis://h:6379", &full);
        for fix in ["databases", "isolation = \"prefix\"", "admin_url"] {
            assert!(msg.contains(fix), "{msg}");
        }
    }

    #[test]
    fn the_rule_pins_the_user_to_its_database_and_denies_what_crosses_databases() {
        let known = |c: &str| c != "client|setinfo";
        let rules = acl_rules("0123abcd", 3, known);
        assert_denied_after_all(
            &rules,
            &[
                "-flushall",
                "-swapdb",
                "-move",
                "-copy",
                "-migrate",
                "-select",
            ],
        );
        let at = |r: &str| rules.iter().position(|x| x == r).expect(r);
        assert!(at("-select") < at("+select|3"));
        assert!(at("-client") < at("+client|id"));
        assert!(!rules.iter().any(|r| r.contains("setinfo")));
        for allowed in [
            "-keys",
            "-scan",
            "-flushdb",
            "-info",
            "-dbsize",
            "-@dangerous",
        ] {
            assert!(!rules.contains(&allowed.to_owned()), "{allowed}");
        }
        assert!(!rules.iter().any(|r| r.contains("0123abcd")));
        assert_eq!(pinned(&rules), Some(3));
        assert_eq!(
            pinned(&["~bk_a:*".to_owned(), "+select|0".to_owned()]),
            None,
            "a prefix user is not a database user"
        );
    }
}
