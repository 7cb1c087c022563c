//! Worlds with a ClickHouse slice, end to end through the real binary: a database each,
//! its address and tokens in a process's environment, removal that leaves nothing.
//!
//! On Debian 12's ClickHouse 18.16 (no SQL users) worlds are kept apart by database only;
//! see `clickhouse_server` and src/adapters/clickhouse.rs.

use crate::clickhouse_server::{query, ClickHouseServer};
use crate::harness::*;

fn config() -> String {
    format!(
        r#"
[project]
name = "shop"
{{range}}

[services.ch]
adapter = "clickhouse"
admin_url = "${{env.CH_ADMIN}}"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["ch"]
env = {{ CH_URL = "${{ch.url}}", CH_DATABASE = "${{ch.database}}" }}
"#
    )
}

#[test]
fn two_worlds_get_their_own_database_and_remove_drops_only_its_own() {
    let server = ClickHouseServer::start();
    let env = Env::new(&config());
    let vars = [("CH_ADMIN", server.admin_url.as_str())];
    for w in ["a", "b"] {
        let out = env.binky_env(&["up", w], &vars);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let served_a = served_env(env.port_of("a", "api"));
    let served_b = served_env(env.port_of("b", "api"));
    let (url_a, db_a) = (
        served_a["CH_URL"].as_str().expect("CH_URL").to_owned(),
        served_a["CH_DATABASE"]
            .as_str()
            .expect("CH_DATABASE")
            .to_owned(),
    );
    let (url_b, db_b) = (
        served_b["CH_URL"].as_str().expect("CH_URL").to_owned(),
        served_b["CH_DATABASE"]
            .as_str()
            .expect("CH_DATABASE")
            .to_owned(),
    );
    assert_ne!(db_a, db_b);
    assert!(
        db_a.starts_with(&format!("bk_{}_shop_a", env.home_id())),
        "{db_a}"
    );
    assert!(url_a.ends_with(&format!("/{db_a}")), "{url_a}");
    assert!(url_b.ends_with(&format!("/{db_b}")), "{url_b}");
    let mut dbs = server.slices_left().0;
    dbs.sort();
    let mut expected = vec![db_a.clone(), db_b.clone()];
    expected.sort();
    assert_eq!(dbs, expected);

    // What a writes through its address, b's database never has.
    query(&url_a, "CREATE TABLE notes (body String) ENGINE = Memory").expect("a creates");
    query(&url_a, "INSERT INTO notes VALUES ('only in a')").expect("a inserts");
    assert_eq!(
        query(&url_a, "SELECT body FROM notes").as_deref(),
        Ok("only in a")
    );
    assert!(query(&url_b, "SELECT body FROM notes").is_err());
    if server.has_users() {
        assert!(
            !url_a.contains(&server.password),
            "the admin password reached a world"
        );
        assert!(query(&url_a, &format!("SELECT 1 FROM {db_b}.notes")).is_err());
    } else {
        // 18.16: the documented limit, the admin's credentials in every world's address.
        assert!(url_a.contains(&server.password));
    }
    let status = env.ok(&["status", "a"]);
    assert!(
        status.contains("ch") && status.contains("ready"),
        "{status}"
    );
    assert!(!status.contains(&server.password), "{status}");

    env.ok(&["remove", "a"]);
    assert_eq!(
        server.slices_left().0,
        vec![db_b.clone()],
        "remove dropped the wrong databases"
    );
    env.ok(&["remove", "b"]);
    assert_eq!(server.slices_left(), (Vec::new(), Vec::new()));
    env.assert_nothing_left(&["a", "b"]);
}
