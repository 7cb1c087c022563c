//! Two binky homes (two developers' machines, two users, a CI job) sharing one server named
//! by the same `admin_url`, with the same project and world names: each home's slice is its
//! own (its name carries the home's identity, its server records which home made it), each
//! world's data stays its own, and `remove` and `binky gc` in one home leave the other's
//! slice and data. Against a real PostgreSQL, MariaDB and Redis.

use std::time::Duration;

use binky::adapters::postgres::Postgres;
use binky::adapters::{Adapter, AdapterConfig, Maker, Slice};

use crate::harness::*;
use crate::mariadb_server::MariaDbServer;
use crate::pg_server::PgServer;
use crate::redis_server::{connect, RedisServer};

/// A project `project` whose one service, `store`, is a slice of the server
/// `$SHARED_ADMIN` names, through `adapter`.
fn config(project: &str, adapter: &str) -> String {
    format!(
        r#"
[project]
name = "{project}"
{{range}}

[services.store]
adapter = "{adapter}"
admin_url = "${{env.SHARED_ADMIN}}"
"#
    )
}

/// One server two homes share, as these tests look at it.
trait Shared {
    /// The adapter's name in binky.toml.
    fn adapter(&self) -> &'static str;
    /// The server's admin URL.
    fn admin_url(&self) -> String;
    /// Writes `text` into the slice at `url` (its own credentials).
    fn write(&self, url: &str, text: &str);
    /// What the slice at `url` holds, sorted.
    fn read(&self, url: &str) -> Vec<String>;
    /// The slices on the server (`bk_…`), sorted.
    fn slices(&self) -> Vec<String>;
    /// The home the server's own record names as the maker of slice `name`.
    fn maker(&self, name: &str) -> Option<String>;
    /// The longest name the server takes for what a slice is made of.
    fn limit(&self) -> usize;
}

/// The home a `binky slice of home <id>` comment names.
fn home_in_comment(comment: &str) -> Option<String> {
    comment
        .strip_prefix("binky slice of home ")
        .map(str::to_owned)
}

impl Shared for PgServer {
    fn adapter(&self) -> &'static str {
        "postgres"
    }
    fn admin_url(&self) -> String {
        self.admin_url.clone()
    }
    fn write(&self, url: &str, text: &str) {
        self.query(
            url,
            &format!(
                "create table if not exists notes (body text); insert into notes values ('{text}')"
            ),
        );
    }
    fn read(&self, url: &str) -> Vec<String> {
        self.query(url, "select body from notes order by 1")
            .into_iter()
            .map(|mut r| r.swap_remove(0))
            .collect()
    }
    fn slices(&self) -> Vec<String> {
        self.slice_databases()
    }
    fn maker(&self, name: &str) -> Option<String> {
        // The database's comment and the role's name the same home.
        let rows = self.admin(&format!(
            "select shobj_description(d.oid, 'pg_database'), shobj_description(r.oid, 'pg_authid') \
             from pg_database d, pg_roles r where d.datname = '{name}' and r.rolname = '{name}'"
        ));
        let row = rows.first()?;
        let (db, role) = (home_in_comment(&row[0]), home_in_comment(&row[1]));
        assert_eq!(
            db, role,
            "{name}: the database and the role name different homes"
        );
        db
    }
    fn limit(&self) -> usize {
        63
    }
}

impl Shared for MariaDbServer {
    fn adapter(&self) -> &'static str {
        "mariadb"
    }
    fn admin_url(&self) -> String {
        self.admin_url.clone()
    }
    fn write(&self, url: &str, text: &str) {
        self.query(
            url,
            &format!(
                "CREATE TABLE IF NOT EXISTS notes (body TEXT); INSERT INTO notes VALUES ('{text}')"
            ),
        );
    }
    fn read(&self, url: &str) -> Vec<String> {
        self.query(url, "SELECT body FROM notes ORDER BY 1")
            .into_iter()
            .map(|mut r| r.swap_remove(0))
            .collect()
    }
    fn slices(&self) -> Vec<String> {
        self.slice_databases()
    }
    fn maker(&self, name: &str) -> Option<String> {
        self.admin(&format!(
            "SELECT home FROM binky_catalog.slices WHERE name = '{name}'"
        ))
        .first()
        .map(|r| r[0].clone())
    }
    fn limit(&self) -> usize {
        // Database names (64); user names are cut to MySQL's 32 with a hash.
        64
    }
}

impl Shared for RedisServer {
    fn adapter(&self) -> &'static str {
        "redis"
    }
    fn admin_url(&self) -> String {
        self.admin_url.clone()
    }
    fn write(&self, url: &str, text: &str) {
        redis::cmd("RPUSH")
            .arg("notes")
            .arg(text)
            .query::<i64>(&mut connect(url))
            .expect("RPUSH");
    }
    fn read(&self, url: &str) -> Vec<String> {
        let mut notes: Vec<String> = redis::cmd("LRANGE")
            .arg("notes")
            .arg(0)
            .arg(-1)
            .query(&mut connect(url))
            .expect("LRANGE");
        notes.sort();
        notes
    }
    fn slices(&self) -> Vec<String> {
        let mut users: Vec<String> = self
            .users()
            .into_iter()
            .filter(|u| u.starts_with("bk_"))
            .collect();
        users.sort();
        users
    }
    fn maker(&self, name: &str) -> Option<String> {
        redis::cmd("HGET")
            .arg("binky:slices")
            .arg(name)
            .query(&mut self.admin())
            .expect("HGET")
    }
    fn limit(&self) -> usize {
        // ACL user names have no limit; binky's names stay PostgreSQL's length everywhere.
        63
    }
}

/// The address world `world` of `env` got for its `store`.
fn store_url(env: &Env, world: &str) -> String {
    env.env_of(world)["STORE_URL"]
        .as_str()
        .expect("STORE_URL")
        .to_owned()
}

/// `binky up world` in `env` with the shared server, insisting on success.
fn up(env: &Env, world: &str, server: &dyn Shared) {
    let admin = server.admin_url();
    let out = env.binky_env(&["up", world], &[("SHARED_ADMIN", admin.as_str())]);
    assert!(out.status.success(), "up {world}: {}", stderr(&out));
}

/// Two homes bring up world `world` of project `project` against `server`; each slice is
/// its home's, holds its own data, and `gc` then `remove` in one leave the other's.
fn two_homes_keep_apart(server: &dyn Shared, project: &str, world: &str) {
    let toml = config(project, server.adapter());
    let (a, b) = (Env::new(&toml), Env::new(&toml));
    let (ha, hb) = (a.home_id(), b.home_id());
    assert_ne!(ha, hb, "two homes got one identity");
    up(&a, world, server);
    up(&b, world, server);
    let (name_a, name_b) = (
        a.slice_name(project, world, "store"),
        b.slice_name(project, world, "store"),
    );
    assert_ne!(name_a, name_b);
    for (name, home) in [(&name_a, &ha), (&name_b, &hb)] {
        assert!(name.starts_with(&format!("bk_{home}_")), "{name}");
        assert!(name.len() <= server.limit(), "{name}: {} bytes", name.len());
        assert_eq!(
            server.maker(name).as_deref(),
            Some(home.as_str()),
            "the server does not record {home} as the maker of {name}"
        );
    }
    let mut both = vec![name_a.clone(), name_b.clone()];
    both.sort();
    assert_eq!(server.slices(), both);
    // Each writes; neither sees the other's.
    let (url_a, url_b) = (store_url(&a, world), store_url(&b, world));
    assert_ne!(url_a, url_b);
    server.write(&url_a, "written in home a");
    server.write(&url_b, "written in home b");
    assert_eq!(server.read(&url_a), ["written in home a"]);
    assert_eq!(server.read(&url_b), ["written in home b"]);

    // gc in b finds a's slice on the server, which no world of b owns: another home's, left.
    let out = b.ok(&["gc", "--all-servers", "--yes"]);
    assert!(
        out.contains(&name_a) && out.contains(&format!("belongs to another binky home ({ha})")),
        "{out}"
    );
    assert!(!out.contains(&format!("dropped {name_a}")), "{out}");
    assert!(!out.contains(&name_b), "b's own slice is no orphan: {out}");
    assert_eq!(server.slices(), both);
    assert_eq!(server.read(&url_a), ["written in home a"]);

    // remove in b drops b's slice alone.
    b.ok(&["remove", world]);
    assert_eq!(server.slices(), std::slice::from_ref(&name_a));
    assert_eq!(server.read(&url_a), ["written in home a"]);
    assert_eq!(server.maker(&name_a).as_deref(), Some(ha.as_str()));
    // And a's gc has nothing of its own to drop.
    let out = a.ok(&["gc", "--all-servers", "--yes"]);
    assert!(out.contains("no orphaned slices"), "{out}");
    assert_eq!(server.read(&url_a), ["written in home a"]);

    a.ok(&["remove", world]);
    assert_eq!(server.slices(), Vec::<String>::new());
    a.assert_nothing_left(&[world]);
    b.assert_nothing_left(&[world]);
}

#[test]
fn two_homes_on_one_postgres_with_the_same_names_keep_apart_and_remove_and_gc_leave_the_others_slice(
) {
    let pg = PgServer::start();
    two_homes_keep_apart(&pg, "team", "feat-a");
    pg.assert_no_slices();
}

#[test]
fn two_homes_on_one_mariadb_with_the_same_names_keep_apart_and_remove_and_gc_leave_the_others_slice(
) {
    let db = MariaDbServer::start();
    two_homes_keep_apart(&db, "team", "feat-a");
    db.assert_no_slices();
    // The catalog forgets what went.
    assert!(db.admin("SELECT name FROM binky_catalog.slices").is_empty());
}

#[test]
fn two_homes_on_one_redis_with_the_same_names_keep_apart_and_remove_and_gc_leave_the_others_slice()
{
    let server = RedisServer::start();
    two_homes_keep_apart(&server, "team", "feat-a");
    // The catalog forgets what went: no slice, no database held.
    let mut admin = server.admin();
    for hash in ["binky:slices", "binky:databases"] {
        let left: i64 = redis::cmd("HLEN").arg(hash).query(&mut admin).unwrap();
        assert_eq!(left, 0, "{hash}");
    }
}

#[test]
fn long_project_and_world_names_give_each_home_a_slice_within_the_servers_limits() {
    let project = "a-project-whose-name-is-long-enough-to-matter";
    let world = "feature/a-world-name-far-longer-than-any-server-takes-for-a-name";
    let pg = PgServer::start();
    two_homes_keep_apart(&pg, project, world);
    let db = MariaDbServer::start();
    two_homes_keep_apart(&db, project, world);
    db.assert_no_slices();
}

/// The issue's case: two homes had made the slice `bk_team_feat_a_store` alike before
/// homes had an identity (each recorded it, the server had one database both used).
/// After the upgrade the first daemon to reconcile the world adopts it (its data kept,
/// not renamed); the other home is told it belongs to another home, its `remove` leaves it,
/// and its next `up` gets a slice of its own.
#[test]
fn a_slice_two_homes_made_alike_before_homes_had_an_identity_is_adopted_by_one_and_left_by_the_other(
) {
    let pg = PgServer::start();
    let toml = config("team", "postgres");
    let (a, b) = (Env::new(&toml), Env::new(&toml));
    let (ha, hb) = (a.home_id(), b.home_id());
    up(&a, "feat-a", &pg);
    up(&b, "feat-a", &pg);
    // Make both homes as a binky before this change left them: the slice each records is
    // the old name (with its own secret), and on the server stands one database of that
    // name, marked `binky slice` as binky marked its slices then, holding data.
    let legacy = "bk_team_feat_a_store".to_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let secret_a = recorded_secret(&a);
    for env in [&a, &b] {
        env.ok(&["daemon", "stop"]);
        let name = env.slice_name("team", "feat-a", "store");
        let gone = Slice {
            name: name.clone(),
            secret: String::new(),
        };
        rt.block_on(Postgres.teardown(&gone, &pg.cfg())).unwrap();
        rename_recorded_slice(env, &legacy);
    }
    let old = Slice {
        name: legacy.clone(),
        secret: secret_a,
    };
    rt.block_on(Postgres.provision(&old, &pg.cfg())).unwrap();
    assert_eq!(pg.slices(), std::slice::from_ref(&legacy));
    assert_eq!(pg.maker(&legacy), None, "made the old way: no home's mark");
    let old_url = rt.block_on(Postgres.resolve(&old, &pg.cfg())).unwrap().url;
    pg.write(&old_url, "written before the upgrade");

    // a's daemon reconciles first: it adopts the slice, keeping its name and data.
    up(&a, "feat-a", &pg);
    assert_eq!(pg.maker(&legacy).as_deref(), Some(ha.as_str()));
    let url_a = store_url(&a, "feat-a");
    assert!(url_a.contains(&format!("/{legacy}")), "{url_a}");
    assert_eq!(pg.read(&url_a), ["written before the upgrade"]);

    // b's daemon finds a's mark: it neither heals (resets the password of) nor uses it.
    let admin = pg.admin_url.clone();
    let out = b.binky_env(&["up", "feat-a"], &[("SHARED_ADMIN", admin.as_str())]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains(&legacy) && said.contains(&format!("belongs to another binky home ({ha})")),
        "{said}"
    );
    assert_eq!(pg.read(&url_a), ["written before the upgrade"]);

    // b's remove leaves it to a, and says so.
    b.ok(&["remove", "feat-a"]);
    assert_eq!(pg.slices(), std::slice::from_ref(&legacy));
    assert_eq!(pg.read(&url_a), ["written before the upgrade"]);
    let events = b.ok(&["events", "feat-a"]);
    assert!(
        events.contains(&format!("belongs to another binky home ({ha})")),
        "{events}"
    );

    // b's next world of that name gets a slice of b's own.
    up(&b, "feat-a", &pg);
    let name_b = b.slice_name("team", "feat-a", "store");
    assert!(name_b.starts_with(&format!("bk_{hb}_")), "{name_b}");
    let url_b = store_url(&b, "feat-a");
    pg.write(&url_b, "written in home b");
    assert_eq!(pg.read(&url_b), ["written in home b"]);
    assert_eq!(pg.read(&url_a), ["written before the upgrade"]);
    let mut both = vec![legacy.clone(), name_b];
    both.sort();
    assert_eq!(pg.slices(), both);

    // A new daemon of a heals the adopted slice as its own, still nothing renamed.
    a.ok(&["daemon", "stop"]);
    up(&a, "feat-a", &pg);
    assert_eq!(
        pg.read(&store_url(&a, "feat-a")),
        ["written before the upgrade"]
    );

    b.ok(&["remove", "feat-a"]);
    a.ok(&["remove", "feat-a"]);
    pg.assert_no_slices();
    a.assert_nothing_left(&["feat-a"]);
    b.assert_nothing_left(&["feat-a"]);
}

/// The secret the home at `env` recorded for its world `feat-a`'s `store` slice.
fn recorded_secret(env: &Env) -> String {
    let db = rusqlite::Connection::open(env.home.join("state.db")).unwrap();
    db.query_row(
        "SELECT secret FROM slices WHERE service = 'store'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// Rewrite the home at `env`'s record of its `store` slice to the name `name`, as a binky
/// before homes had an identity recorded it (its daemon is stopped).
fn rename_recorded_slice(env: &Env, name: &str) {
    let db = rusqlite::Connection::open(env.home.join("state.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let n = db
        .execute(
            "UPDATE slices SET name = ?1 WHERE service = 'store'",
            [name],
        )
        .unwrap();
    assert_eq!(n, 1);
}

/// gc drops this home's orphans alone; a slice no home marked, and one of a home that is
/// gone, are listed and left until the user says which to drop.
#[test]
fn gc_leaves_unmarked_slices_and_other_homes_until_told_which_to_drop() {
    let pg = PgServer::start();
    let env = Env::new(&config("team", "postgres"));
    up(&env, "w", &pg);
    let me = env.home_id();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let make = |name: &str, home: Option<&str>| {
        let s = Slice {
            name: name.to_owned(),
            secret: "x-secret".into(),
        };
        rt.block_on(async {
            Postgres.provision(&s, &pg.cfg()).await.unwrap();
            if let Some(h) = home {
                Postgres.claim(&s, &pg.cfg(), h).await.unwrap();
            }
        });
    };
    // Left by a crash of this home; by a home whose store was deleted; from before marks.
    let mine = format!("bk_{me}_team_crashed_store");
    let gone = "bk_zzzzzzzz_team_w_store";
    let unmarked = "bk_team_old_store";
    make(&mine, Some(&me));
    make(gone, Some("zzzzzzzz"));
    make(unmarked, None);
    let listed = env.ok(&["gc", "--all-servers"]);
    for name in [&mine, gone, unmarked] {
        assert!(listed.contains(name), "{name}: {listed}");
    }
    assert!(
        listed.contains("belongs to another binky home (zzzzzzzz)")
            && listed.contains("--gone-home")
            && listed.contains("--unmarked"),
        "{listed}"
    );
    let out = env.ok(&["gc", "--all-servers", "--yes"]);
    assert!(out.contains(&format!("dropped {mine}")), "{out}");
    assert!(!out.contains(&format!("dropped {gone}")), "{out}");
    assert!(!out.contains(&format!("dropped {unmarked}")), "{out}");
    let ours = env.slice_name("team", "w", "store");
    let mut left = vec![gone.to_owned(), unmarked.to_owned(), ours.clone()];
    left.sort();
    assert_eq!(pg.slices(), left);
    // A home id that is none, or this home's, is refused, naming why.
    let out = env.binky(&["gc", "--all-servers", "--gone-home", "Nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("not a home's identity"),
        "{}",
        stderr(&out)
    );
    let out = env.binky(&["gc", "--all-servers", "--gone-home", &me]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("is this home"), "{}", stderr(&out));
    // Told, each goes; the world's own slice stays.
    let out = env.ok(&["gc", "--all-servers", "--yes", "--gone-home", "zzzzzzzz"]);
    assert!(out.contains(&format!("dropped {gone}")), "{out}");
    let out = env.ok(&["gc", "--all-servers", "--yes", "--unmarked"]);
    assert!(out.contains(&format!("dropped {unmarked}")), "{out}");
    assert_eq!(pg.slices(), [ours]);
    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

/// What `adapter` records on a real server (`cfg`) of which home made the slice `name`: a
/// slice made the old way has no home's mark; the first home to claim it is recorded and
/// a second home's claim does not take it; a new provision (a heal) keeps the mark;
/// `binky gc`'s listing finds the slice; the mark goes with the slice, and a slice of
/// that name made again is the new maker's.
fn server_keeps_the_makers_mark(adapter: &dyn Adapter, cfg: &AdapterConfig, name: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = Slice {
        name: name.to_owned(),
        secret: binky_controllers::adapter::random_secret().unwrap(),
    };
    let (a, b) = (
        Maker::Home("aaaaaaaa".into()),
        Maker::Home("bbbbbbbb".into()),
    );
    rt.block_on(async {
        let maker = || adapter.maker(&s, cfg);
        assert_eq!(maker().await.unwrap(), Maker::Absent, "{name}");
        adapter.provision(&s, cfg).await.unwrap();
        assert_eq!(maker().await.unwrap(), Maker::Unmarked, "{name}");
        assert_eq!(adapter.claim(&s, cfg, "aaaaaaaa").await.unwrap(), a);
        assert_eq!(maker().await.unwrap(), a, "{name}");
        assert_eq!(
            adapter.claim(&s, cfg, "bbbbbbbb").await.unwrap(),
            a,
            "{name}: a second home took the slice"
        );
        adapter.provision(&s, cfg).await.unwrap();
        assert_eq!(maker().await.unwrap(), a, "{name}: a heal lost the mark");
        assert!(
            adapter.list(cfg).await.unwrap().contains(&s.name),
            "{name} is not listed"
        );
        adapter.teardown(&s, cfg).await.unwrap();
        assert_eq!(
            maker().await.unwrap(),
            Maker::Absent,
            "{name}: its mark outlived it"
        );
        adapter.provision(&s, cfg).await.unwrap();
        assert_eq!(adapter.claim(&s, cfg, "bbbbbbbb").await.unwrap(), b);
        adapter.teardown(&s, cfg).await.unwrap();
        assert_eq!(maker().await.unwrap(), Maker::Absent, "{name}");
    });
}

#[test]
fn clickhouse_keeps_the_mark_of_the_home_that_made_a_slice() {
    let server = crate::clickhouse_server::ClickHouseServer::start();
    server_keeps_the_makers_mark(
        &binky::adapters::clickhouse::ClickHouse,
        &server.cfg(),
        "bk_h2k4m6p7_team_w_events",
    );
    assert_eq!(server.slices_left(), (Vec::new(), Vec::new()));
}

#[test]
fn rabbitmq_keeps_the_mark_of_the_home_that_made_a_slice() {
    let node = crate::rabbitmq_server::RabbitNode::shared();
    server_keeps_the_makers_mark(
        &binky::adapters::rabbitmq::RabbitMq,
        &node.cfg(),
        "bk_h2k4m6p7_team_w_mq",
    );
    assert!(!node.has_vhost("bk_h2k4m6p7_team_w_mq"));
}

#[test]
fn s3_keeps_the_mark_of_the_home_that_made_a_slice_in_bucket_and_prefix_mode() {
    let moto = crate::s3_server::MotoServer::start();
    server_keeps_the_makers_mark(
        &binky::adapters::s3::S3,
        &moto.cfg(),
        "bk_h2k4m6p7_team_w_files",
    );
    server_keeps_the_makers_mark(
        &binky::adapters::s3::S3,
        &moto.shared_cfg("team-shared"),
        "bk_h2k4m6p7_team_w_files",
    );
    assert_eq!(
        moto.buckets().into_iter().collect::<Vec<_>>(),
        ["team-shared"],
        "a slice's bucket was left"
    );
}

#[test]
fn kafka_keeps_the_mark_of_the_home_that_made_a_slice() {
    let server = crate::kafka_server::KafkaServer::start();
    server_keeps_the_makers_mark(
        &binky::adapters::kafka::Kafka,
        &server.cfg("orders"),
        "bk_h2k4m6p7_team_w_events",
    );
    assert!(server.topics_with("bk_").is_empty());
}

/// A project whose `store` is a PostgreSQL slice cloned from a golden template.
fn golden_config() -> String {
    r#"
[project]
name = "team"
{range}

[services.store]
adapter = "postgres"
admin_url = "${env.SHARED_ADMIN}"
clone_from = "golden"
migrate = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c 'create table if not exists notes (body text)'"
seed = "psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 -q -c \"insert into notes values ('seeded')\""
"#
    .to_owned()
}

/// The golden templates `env` records, by key and name.
fn templates_of(env: &Env) -> Vec<(String, String)> {
    let listed: serde_json::Value =
        serde_json::from_str(&env.ok(&["golden", "ls", "--json"])).unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["key"].as_str().unwrap().to_owned(),
                g["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Golden templates are per home: two homes with the same migrations build one each (its
/// name carrying its home, its server's mark naming it), and `golden rm` in one drops its
/// own alone. A template its server says another home made (two homes had named it alike
/// before homes had an identity, and that home adopted it) is forgotten by `golden rm`,
/// which says so, and left on the server.
#[test]
fn two_homes_build_their_own_golden_templates_and_golden_rm_leaves_the_others() {
    let pg = PgServer::start();
    let (a, b) = (Env::new(&golden_config()), Env::new(&golden_config()));
    let (ha, hb) = (a.home_id(), b.home_id());
    up(&a, "w", &pg);
    up(&b, "w", &pg);
    let (ta, tb) = (templates_of(&a), templates_of(&b));
    assert_eq!((ta.len(), tb.len()), (1, 1), "{ta:?} {tb:?}");
    let (name_a, name_b) = (ta[0].1.clone(), tb[0].1.clone());
    assert!(name_a.starts_with(&format!("bk_golden_{ha}_")), "{name_a}");
    assert!(name_b.starts_with(&format!("bk_golden_{hb}_")), "{name_b}");
    assert_eq!(pg.maker(&name_a).as_deref(), Some(ha.as_str()));
    assert_eq!(pg.maker(&name_b).as_deref(), Some(hb.as_str()));
    for env in [&a, &b] {
        assert_eq!(pg.read(&store_url(env, "w")), ["seeded"]);
    }

    // b's golden rm drops b's template, never a's.
    let out = b.ok(&["golden", "rm", &tb[0].0]);
    assert!(
        out.contains(&format!("dropped golden template {}", tb[0].0)),
        "{out}"
    );
    wait_until("b's template dropped", Duration::from_secs(60), || {
        !pg.slices().contains(&name_b)
    });
    assert!(pg.slices().contains(&name_a), "{:?}", pg.slices());
    // a's next world is still cloned from a's template.
    up(&a, "w2", &pg);
    assert_eq!(pg.read(&store_url(&a, "w2")), ["seeded"]);
    assert!(
        a.ok(&["events", "w2"])
            .contains(&format!("from golden template {name_a}")),
        "w2 was not cloned from a's template"
    );

    // b records a's template as its own (the name two homes shared before homes had an
    // identity, which a adopted): golden rm in b says whose it is, and leaves it.
    up(&b, "w2", &pg);
    let tb = templates_of(&b);
    assert_eq!(tb.len(), 1, "{tb:?}");
    let own_b = tb[0].1.clone();
    b.ok(&["daemon", "stop"]);
    let db = rusqlite::Connection::open(b.home.join("state.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute("UPDATE goldens SET name = ?1", [&name_a])
        .unwrap();
    drop(db);
    let out = b.ok(&["golden", "rm", &tb[0].0]);
    assert!(
        out.contains(&format!("belongs to another binky home ({ha})")) && out.contains(&name_a),
        "{out}"
    );
    wait_until("b forgets a's template", Duration::from_secs(60), || {
        templates_of(&b).is_empty()
    });
    assert!(pg.slices().contains(&name_a), "a's template was dropped");
    assert_eq!(pg.read(&store_url(&a, "w2")), ["seeded"]);

    // Done: b's own template (its record rewritten above) is b's orphan for gc.
    let out = b.ok(&["gc", "--all-servers", "--yes"]);
    assert!(out.contains(&format!("dropped {own_b}")), "{out}");
    for env in [&a, &b] {
        env.ok(&["settings", "golden_keep=0"]);
        env.ok(&["remove", "w"]);
        env.ok(&["remove", "w2"]);
    }
    wait_until(
        "a's template goes with a's last world",
        Duration::from_secs(60),
        || pg.slices().is_empty(),
    );
    pg.assert_no_slices();
    a.assert_nothing_left(&["w", "w2"]);
    b.assert_nothing_left(&["w", "w2"]);
}

/// Two homes' daemons choose a Redis database for their worlds at once: the choice is
/// claimed in the server's catalog before the world's user is made, so a database another
/// home claimed a moment ago — its user not there yet, its database still empty — is never
/// handed out again; and the catalog's record goes with the slice.
#[test]
fn a_redis_database_another_home_just_claimed_is_never_handed_out_again() {
    let server = RedisServer::start();
    let mut admin = server.admin();
    // Another home's daemon chose database 1 and has not made its user yet.
    let theirs = "bk_q7r2s3t4_team_feat_a_cache";
    redis::cmd("HSET")
        .arg("binky:databases")
        .arg(1)
        .arg(theirs)
        .query::<i64>(&mut admin)
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ours = Slice {
        name: "bk_h2k4m6p7_team_feat_a_cache".into(),
        secret: binky_controllers::adapter::random_secret().unwrap(),
    };
    let redis = binky::adapters::redis::Redis;
    let url = rt.block_on(async {
        redis
            .provision(&ours, &server.database_cfg())
            .await
            .unwrap();
        redis
            .resolve(&ours, &server.database_cfg())
            .await
            .unwrap()
            .url
    });
    assert!(url.ends_with("/2"), "{url}");
    let holder: Option<String> = redis::cmd("HGET")
        .arg("binky:databases")
        .arg(2)
        .query(&mut admin)
        .unwrap();
    assert_eq!(holder.as_deref(), Some(ours.name.as_str()));
    rt.block_on(redis.teardown(&ours, &server.database_cfg()))
        .unwrap();
    let held: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg("binky:databases")
        .query(&mut admin)
        .unwrap();
    assert_eq!(
        held,
        [("1".to_owned(), theirs.to_owned())].into(),
        "the other home's claim was touched, or ours left"
    );
}
