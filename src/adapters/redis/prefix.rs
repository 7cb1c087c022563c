//! `isolation = "prefix"`: a key prefix per world, enforced by an ACL user of its own, on a
//! server where neither a server nor a database per world fits.
//!
//! A slice `bk_acme_login_fix_cache` is the prefix `bk_acme_login_fix_cache:` for keys and
//! pub/sub channels, and an ACL user of the same name whose password is the slice's secret.
//! `${cache.url}` is `redis://bk_acme_login_fix_cache:<secret>@host:port/<db>` and
//! `${cache.prefix}` the prefix; a service puts the prefix in front of every key it uses
//! (most client libraries have a `prefix`/`namespace`/`keyPrefix` option for that). An app
//! that does not (Celery, Sidekiq, BullMQ, a cache without `KEY_PREFIX`) gets `NOPERM`.
//!
//! # Why a key pattern alone is not isolation
//! `~prefix*` only checks the key *arguments* of a command. Commands without key arguments
//! reach the whole server: `KEYS`, `SCAN`, `RANDOMKEY` and `DBSIZE` show other worlds' keys
//! (or their number), `FLUSHALL`/`FLUSHDB` delete them, pub/sub channels are shared by
//! every user, and several introspection commands show other connections. So the user
//! starts from `+@all` minus what the server itself calls `@dangerous`/`@admin`, and
//! [`denied`] then removes every remaining command that crosses prefixes, each with the
//! reason next to it; [`ALLOWED_BACK`] re-allows the harmless subcommands of a denied
//! command (`CLIENT SETNAME`, `SCRIPT LOAD`, …) that client libraries send. Channels are
//! restricted to the prefix with `resetchannels &prefix*`.
//!
//! The `every_command_a_slice_may_run_is_key_checked_or_reviewed` integration test asks
//! the server for every command a slice user may run and fails on any command without key
//! arguments that nobody reviewed: a server upgrade that adds one cannot slip through.
//!
//! # Guarantees
//! - A world's user reads, writes, deletes and subscribes only under its own prefix; the
//!   commands in [`denied`] answer `NOPERM` (Lua scripts run with the caller's ACL too, so
//!   `EVAL` reaches no further than the caller).
//! - Teardown deletes the user first (the server drops its connections, so nothing writes
//!   under the prefix during the sweep), then every key under the prefix, in every
//!   database that holds keys, with `SCAN MATCH` + `UNLINK` in batches.
//!
//! # Caveats
//! - `PSUBSCRIBE` is allowed for exactly the pattern `<prefix>*`: Redis matches a
//!   subscribed *pattern* literally against the user's channel patterns.
//! - Client-side caching (`CLIENT TRACKING`) and `INFO` are refused (see [`DENIED`]); a
//!   client library that insists on `INFO` for a version check needs that check turned off.
//! - Removing a slice scans the server's whole keyspace for its prefix: about 1.3 s per
//!   million keys on the server.

use redis::aio::MultiplexedConnection;

use super::super::{Result, Slice};
use super::admin::Server;

/// `SCAN … COUNT` during teardown: keys looked at per round trip.
const SCAN_COUNT: usize = 1000;

/// Commands a slice user may not run, on top of `-@dangerous -@admin`, and why. Commands
/// the server already files under those categories are listed again when they cross
/// prefixes, so a server that categorises them differently still refuses them. Entries
/// the server does not know are left out of the rule (it cannot run them anyway).
pub const DENIED: &[(&str, &str)] = &[
    // Keyless commands over the whole keyspace.
    ("keys", "lists every key of the database"),
    ("scan", "walks every key of the database"),
    ("randomkey", "returns some other world's key"),
    ("dbsize", "counts every world's keys"),
    ("flushall", "deletes every world's keys"),
    ("flushdb", "deletes every world's keys"),
    ("swapdb", "swaps whole databases"),
    // A world stays in the database of its URL (`+select|<db>` re-allows that one).
    ("select", "moves the connection to another database"),
    ("move", "moves a key to another database"),
    ("migrate", "moves keys to another server"),
    ("restore", "writes raw payloads (@dangerous)"),
    (
        "sort",
        "BY/GET patterns read arbitrary keys (@dangerous; Redis 7 checks them, older did not)",
    ),
    (
        "sort_ro",
        "BY/GET patterns read arbitrary keys (@dangerous)",
    ),
    // Introspection that shows other worlds' keys, commands or connections.
    ("monitor", "streams every client's commands"),
    (
        "info",
        "INFO keyspace/clients/commandstats describe every world",
    ),
    (
        "slowlog",
        "shows other clients' commands with their arguments",
    ),
    ("latency", "server-wide diagnostics (@admin)"),
    (
        "memory",
        "MEMORY STATS counts every world's keys (MEMORY USAGE is re-allowed)",
    ),
    (
        "client",
        "CLIENT LIST/KILL/PAUSE see or stop other connections, and CLIENT TRACKING BCAST \
         streams every world's modified key names (own-connection subcommands re-allowed)",
    ),
    (
        "pubsub",
        "PUBSUB CHANNELS/NUMSUB/NUMPAT list every world's channels (not checked against &patterns)",
    ),
    (
        "cluster",
        "CLUSTER GETKEYSINSLOT/COUNTKEYSINSLOT list and count every world's keys",
    ),
    (
        "function",
        "one library namespace for all: FUNCTION LIST/DUMP show, DELETE/FLUSH/KILL/RESTORE \
         change other worlds' functions",
    ),
    (
        "script",
        "SCRIPT FLUSH empties every world's script cache, SCRIPT KILL stops another world's \
         script, SCRIPT DEBUG can block the server (LOAD/EXISTS re-allowed)",
    ),
    // Server administration (already @admin/@dangerous).
    (
        "acl",
        "ACL LOG/LIST/GETUSER show other users (WHOAMI/CAT/GENPASS re-allowed)",
    ),
    // And the rest of the server's administration: [`super::SERVER_ADMIN`].
];

/// Subcommands re-allowed after their command is denied in [`DENIED`]: each acts on the
/// caller's own connection, keys or nothing at all. Entries the server does not know (the
/// 7.2 additions on a 7.0 server) are left out.
pub const ALLOWED_BACK: &[&str] = &[
    // Client libraries send these while connecting.
    "client|id",
    "client|getname",
    "client|setname",
    "client|setinfo",
    "client|info",
    "client|reply",
    "client|no-touch",
    "client|help",
    "acl|whoami",
    "acl|cat",
    "acl|genpass",
    "acl|help",
    // Scripts are content-addressed; loading one changes nothing for other worlds.
    "script|load",
    "script|exists",
    "script|help",
    // The caller's own key (key-checked).
    "memory|usage",
    "memory|help",
];

/// The key and channel prefix of a slice: its name and a colon (slice names hold no `:`,
/// so no prefix is the start of another).
pub fn prefix(slice: &Slice) -> String {
    format!("{}:", slice.name)
}

/// The `ACL SETUSER <name>` rules for `slice`, confined to database `db`; `known` says
/// whether the server has a command (`"client|setinfo"`).
pub fn acl_rules(slice: &Slice, db: i64, known: impl Fn(&str) -> bool) -> Vec<String> {
    let prefix = prefix(slice);
    let head = vec![
        // `reset` first: whatever the user had (drift, an older rule) is gone.
        "reset".to_owned(),
        "on".to_owned(),
        // The password as its SHA-256, so the plain text is never part of the command.
        format!("#{}", super::sha256_hex(&slice.secret)),
        format!("~{prefix}*"),
        "resetchannels".to_owned(),
        format!("&{prefix}*"),
        "+@all".to_owned(),
        "-@dangerous".to_owned(),
        "-@admin".to_owned(),
    ];
    acl_rules_from(
        head,
        denied().map(|(c, _)| *c),
        ALLOWED_BACK.iter().copied(),
        db,
        known,
    )
}

/// A world's user's rules: `head` (its password, keys, channels and categories), then
/// `-command` for each of `denied` and `+subcommand` for each of `allowed_back` that the
/// server knows (`known`), and last `+select|db`.
pub(super) fn acl_rules_from(
    mut head: Vec<String>,
    denied: impl Iterator<Item = &'static str>,
    allowed_back: impl Iterator<Item = &'static str>,
    db: i64,
    known: impl Fn(&str) -> bool,
) -> Vec<String> {
    head.extend(denied.filter(|c| known(c)).map(|c| format!("-{c}")));
    head.extend(allowed_back.filter(|c| known(c)).map(|c| format!("+{c}")));
    // Clients send `SELECT <db>` for the database of their URL (some even for 0).
    head.push(format!("+select|{db}"));
    head
}

/// Every command a prefix user may not run, with why: [`DENIED`] and
/// [`super::SERVER_ADMIN`].
pub fn denied() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    DENIED.iter().chain(super::SERVER_ADMIN)
}

/// Every command name [`acl_rules`] may mention, for asking the server which it knows.
pub(super) fn mentioned() -> Vec<&'static str> {
    denied()
        .map(|(c, _)| *c)
        .chain(ALLOWED_BACK.iter().copied())
        .collect()
}

/// Delete every key under `slice`'s prefix, in every database that holds keys (`COPY … DB
/// n` may have put some of the world's keys outside the URL's database). Run after its
/// user is gone, so nothing writes under the prefix meanwhile.
pub(super) async fn sweep(
    server: &Server,
    con: &mut MultiplexedConnection,
    slice: &Slice,
) -> Result<()> {
    let pattern = format!("{}*", prefix(slice));
    for db in server.databases_with_keys(con).await? {
        server.select(con, db).await?;
        let mut cursor: u64 = 0;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT);
            let (next, keys): (u64, Vec<Vec<u8>>) = server
                .query(con, &scan, &format!("SCAN MATCH {pattern}"), &[])
                .await?;
            if !keys.is_empty() {
                server
                    .query::<i64>(con, redis::cmd("UNLINK").arg(&keys), "UNLINK", &[])
                    .await?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_denied_after_all, slice};
    use super::*;

    #[test]
    fn the_rule_denies_keyless_commands_and_re_allows_only_known_subcommands() {
        let known = |c: &str| c != "client|setinfo" && c != "client|no-touch";
        let rules = acl_rules(&slice(), 2, known);
        assert_denied_after_all(
            &rules,
            &[
                "-keys",
                "-scan",
                "-randomkey",
                "-dbsize",
                "-flushall",
                "-flushdb",
            ],
        );
        let at = |r: &str| rules.iter().position(|x| x == r).expect(r);
        assert!(rules.contains(&"~bk_acme_login_fix_cache:*".to_owned()));
        assert!(rules.contains(&"&bk_acme_login_fix_cache:*".to_owned()));
        assert!(at("resetchannels") < at("&bk_acme_login_fix_cache:*"));
        assert!(at("-client") < at("+client|id"));
        assert!(at("-select") < at("+select|2"));
        assert!(!rules
            .iter()
            .any(|r| r.contains("setinfo") || r.contains("no-touch")));
        // The password goes as its hash, never as text.
        assert!(!rules.iter().any(|r| r.contains("0123abcd")));
        assert!(rules.contains(&format!("#{}", super::super::sha256_hex("0123abcd"))));
    }
}
