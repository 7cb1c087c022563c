//! The descriptor against every place that asks it, and against the docs.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::adapters::{tokens, Address, Registry};

/// Everything binky answers about the adapter `text` names, in one comparable value: each
/// question any part of binky asks of an adapter's name.
#[derive(Debug, PartialEq, Eq)]
struct Answers {
    /// `binky.toml`'s reading.
    parsed: Option<AdapterKind>,
    /// The family (tokens, slices recorded on one server, gc's searches).
    family: Option<AdapterKind>,
    /// The variable the daemon reads for a service without `admin_url`.
    admin_url_env: Option<&'static str>,
    /// The server binky runs for it.
    server: Option<crate::servers::Kind>,
    /// The slice driver the registry hands out, and its names.
    driver: Option<AdapterKind>,
    driver_names: &'static [&'static str],
    builtin: bool,
    /// Whether it clones: known statically, and as the driver says.
    clones: Option<bool>,
    driver_clones: bool,
    /// The tokens `binky check` holds a config to, and those an address is completed with.
    documented: Option<Vec<&'static str>>,
    completed: BTreeMap<String, String>,
    /// `binky check`'s findings on a service of it (codes and keys).
    findings: Vec<(&'static str, String)>,
}

fn answers(text: &str) -> Answers {
    let registry = Registry::default();
    let driver = registry.get(text).ok();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let driver_clones = driver.as_ref().is_some_and(|d| {
        runtime
            .block_on(d.capabilities(&crate::adapters::AdapterConfig::default()))
            .is_ok_and(|c| c.clone)
    });
    let completed = tokens::complete(
        text,
        Address {
            url: "scheme://u:p@h:1/bk_x".into(),
            tokens: BTreeMap::new(),
        },
    )
    .tokens;
    Answers {
        parsed: AdapterName::parse(text).ok().and_then(|n| n.kind),
        family: AdapterKind::of(text),
        admin_url_env: crate::adapters::admin_url_env(text),
        server: crate::servers::Kind::for_adapter(text),
        driver: driver.as_ref().and_then(|d| d.kind()),
        driver_names: driver.as_ref().map_or(&[], |d| d.names()),
        builtin: registry.is_builtin(text),
        clones: crate::adapters::can_clone_statically(text),
        driver_clones,
        documented: tokens::documented(text),
        completed,
        findings: findings(text),
    }
}

/// `binky check`'s findings (code, key) on a world whose `db` is of adapter `text`, cloned
/// from a golden template, and whose process uses every token the canonical name gives.
fn findings(text: &str) -> Vec<(&'static str, String)> {
    let canonical = AdapterKind::of(text).map_or(text, |k| k.name());
    let env: Vec<String> = tokens::documented(canonical)
        .unwrap_or_default()
        .iter()
        .map(|t| format!("T_{} = \"${{db.{t}}}\"", t.to_uppercase()))
        .collect();
    let toml = format!(
        "[project]\nname = \"p\"\n\n[services.db]\nadapter = \"{text}\"\nmigrate = \"true\"\nclone_from = \"golden\"\n\n[services.web]\ncmd = \"serve ${{self.port}}\"\nurl = true\nenv = {{ {} }}\n",
        env.join(", ")
    );
    crate::check::check(&toml, Path::new("binky.toml"))
        .into_iter()
        .map(|f| (f.code, f.key))
        .collect()
}

/// Each name as `binky.toml` may give it: bare, and with versions.
fn spellings(name: &str) -> [String; 3] {
    [
        name.to_owned(),
        format!("{name}@16"),
        format!("{name}@7.2-alpine"),
    ]
}

#[test]
fn every_name_and_version_answers_every_question_as_its_canonical_name_does() {
    for kind in AdapterKind::ALL {
        let canonical = answers(kind.name());
        // The canonical name's answers are the descriptor's.
        assert_eq!(canonical.parsed, Some(kind));
        assert_eq!(canonical.family, Some(kind));
        assert_eq!(canonical.admin_url_env, kind.admin_url_env());
        assert_eq!(canonical.server, kind.server());
        assert_eq!(canonical.driver, Some(kind));
        assert_eq!(canonical.driver_names, kind.names());
        assert!(canonical.builtin);
        assert_eq!(canonical.clones, Some(kind.can_clone()));
        assert_eq!(canonical.driver_clones, kind.can_clone(), "{kind:?}");
        assert!(
            !canonical
                .findings
                .iter()
                .any(|(code, _)| *code == "unknown-adapter"
                    || *code == "invalid"
                    || *code == "unresolved-token"),
            "{kind:?}: {:?}",
            canonical.findings
        );
        assert_eq!(
            canonical
                .findings
                .iter()
                .any(|(code, _)| *code == "clone-unsupported"),
            !kind.can_clone(),
            "{kind:?}: {:?}",
            canonical.findings
        );
        for name in kind.names() {
            for text in spellings(name) {
                assert_eq!(
                    answers(&text),
                    canonical,
                    "`{text}` against `{}`",
                    kind.name()
                );
            }
        }
    }
}

#[test]
fn an_external_adapters_name_answers_none_of_a_built_in_ones_questions() {
    for text in ["filestore", "filestore@2", "my-store_2"] {
        let a = answers(text);
        assert_eq!(AdapterName::parse(text).map(|n| n.kind), Ok(None), "{text}");
        assert_eq!(
            (a.family, a.admin_url_env, a.server, a.clones, a.builtin),
            (None, None, None, None, false),
            "{text}"
        );
        assert!(a.documented.is_none(), "{text}");
    }
}

#[test]
fn the_table_holds_every_kind_once_and_each_name_names_one_adapter() {
    // `ALL` is the enum, in its order.
    assert_eq!(
        AdapterKind::Elasticsearch as usize + 1,
        AdapterKind::ALL.len()
    );
    for (i, kind) in AdapterKind::ALL.iter().enumerate() {
        assert_eq!(*kind as usize, i);
    }
    let names = AdapterKind::all_names();
    for name in &names {
        assert_eq!(
            names.iter().filter(|n| *n == name).count(),
            1,
            "`{name}` names two adapters"
        );
        // A built-in name is never refused, nor taken for an external adapter's.
        assert!(is_external_name(name), "{name}");
    }
    assert_eq!(Registry::default().builtin_names(), names);
    for kind in AdapterKind::ALL {
        // A person can point binky at a server of their own for every adapter binky could
        // run one for.
        if kind.server().is_some() {
            assert!(kind.admin_url_env().is_some(), "{kind:?}");
        }
    }
    // No two adapters read one variable.
    let vars: Vec<&str> = crate::adapters::admin_url_vars().collect();
    for v in &vars {
        assert_eq!(vars.iter().filter(|w| *w == v).count(), 1, "{v}");
    }
    for server in ServerKind::ALL {
        assert_eq!(server.adapter().server(), Some(server));
        assert_eq!(ServerKind::parse(server.as_str()), Some(server));
        for name in server.adapter().names() {
            assert_eq!(ServerKind::parse(name), Some(server), "{name}");
        }
    }
    assert_eq!(
        ServerKind::choices(),
        "postgres (also postgresql), redis (also valkey), mysql (also mariadb, percona)"
    );
}

#[test]
fn values_that_can_name_no_adapter_are_refused_saying_how_to_write_them() {
    for (text, name, version) in [
        ("postgres@16", "postgres", Some("16")),
        ("valkey@7.2-alpine", "valkey", Some("7.2-alpine")),
        ("percona@8.0_1", "percona", Some("8.0_1")),
        ("filestore@v2", "filestore", Some("v2")),
    ] {
        let read = AdapterName::parse(text).expect(text);
        assert_eq!((read.name, read.version), (name, version), "{text}");
    }
    let no_name = |text: &str| NameError::NoName { text: text.into() };
    let bad_name = |name: &str| NameError::BadName { name: name.into() };
    let empty = |name: &str| NameError::EmptyVersion { name: name.into() };
    let bad_version = |name: &str, version: &str| NameError::BadVersion {
        name: name.into(),
        version: version.into(),
    };
    let builtins = "use a built-in adapter (postgres, postgresql, redis";
    for (text, expected, fix) in [
        ("@16", no_name("@16"), builtins),
        (
            "postgres@",
            empty("postgres"),
            "write adapter = \"postgres\"",
        ),
        (
            "postgres@1 6",
            bad_version("postgres", "1 6"),
            "write adapter = \"postgres\"",
        ),
        (
            "postgres@16@2",
            bad_version("postgres", "16@2"),
            "write adapter = \"postgres\"",
        ),
        (
            "redis@-7",
            bad_version("redis", "-7"),
            "write adapter = \"redis\"",
        ),
        (
            "redis@../7",
            bad_version("redis", "../7"),
            "write adapter = \"redis\"",
        ),
        ("Postgres", bad_name("Postgres"), builtins),
        ("../bin/sh", bad_name("../bin/sh"), builtins),
        ("my store@1", bad_name("my store"), builtins),
    ] {
        let err = AdapterName::parse(text).expect_err(text);
        assert_eq!(err, expected, "{text}");
        assert!(err.fix(None).starts_with(fix), "{text}: {}", err.fix(None));
    }
    let err = AdapterName::parse("Postgres").expect_err("Postgres");
    assert_eq!(
        err.fix(Some("postgres")),
        "did you mean adapter = \"postgres\"?"
    );
    assert!(AdapterName::parse(&format!("redis@{}", "7".repeat(129))).is_err());
    assert!(AdapterName::parse(&"a".repeat(65)).is_err());
    // What the store holds is read, never refused: a world written before the check.
    let old = AdapterName::read("postgres@");
    assert_eq!(
        (old.name, old.version, old.kind),
        ("postgres", Some(""), Some(AdapterKind::Postgres))
    );
}

#[test]
fn binky_check_refuses_a_value_that_names_no_adapter_naming_the_nearest() {
    let check = |adapter: &str| {
        let text = format!("[project]\nname = \"p\"\n\n[services.db]\nadapter = \"{adapter}\"\n");
        crate::check::check(&text, Path::new("binky.toml"))
    };
    let f = check("Postgres");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].code, f[0].key.as_str(), f[0].line),
        ("invalid", "services.db.adapter", Some(5))
    );
    assert!(f[0].message.contains("no adapter `Postgres`"), "{f:?}");
    assert_eq!(f[0].fix, "did you mean adapter = \"postgres\"?");
    let f = check(" valkey");
    assert_eq!(f[0].fix, "did you mean adapter = \"valkey\"?", "{f:?}");
    let f = check("redis@");
    assert!(f[0].message.contains("`redis@` has no version"), "{f:?}");
    assert!(f[0].fix.starts_with("write adapter = \"redis\""), "{f:?}");
    // The nearest name, not the first near one.
    let f = check("postgreql");
    assert_eq!(f[0].code, "unknown-adapter", "{f:?}");
    assert!(
        f[0].fix
            .starts_with("did you mean adapter = \"postgresql\"?"),
        "{f:?}"
    );
}

/// The rows of the markdown table under `header` in `doc`, each split into its cells.
fn table(doc: &str, header: &str) -> Vec<Vec<String>> {
    let start = doc
        .find(header)
        .unwrap_or_else(|| panic!("no table {header}"));
    doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// "`postgres`, `postgresql`" → ["postgres", "postgresql"].
fn listed(cell: &str) -> Vec<String> {
    cell.split(", ")
        .map(|n| n.trim_matches('`').to_owned())
        .collect()
}

#[test]
fn the_docs_list_exactly_the_accepted_names_variables_and_servers() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| {
        std::fs::read_to_string(repo.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let names = |kinds: &[AdapterKind]| -> Vec<Vec<String>> {
        kinds
            .iter()
            .map(|k| k.names().iter().map(|n| (*n).to_owned()).collect())
            .collect()
    };
    let adapters = read("docs/adapters.md");
    let rows = table(&adapters, "| names | slice | isolation | tested against |");
    let in_docs: Vec<Vec<String>> = rows.iter().map(|r| listed(&r[0])).collect();
    assert_eq!(in_docs, names(&AdapterKind::ALL), "docs/adapters.md");

    let rows = table(&adapters, "| adapter | variable | with neither |");
    let in_docs: Vec<(String, Option<String>)> = rows
        .iter()
        .map(|r| {
            let var = r[1]
                .strip_prefix("`$")
                .and_then(|v| v.strip_suffix('`'))
                .map(str::to_owned);
            (r[0].clone(), var)
        })
        .collect();
    let in_code: Vec<(String, Option<String>)> = AdapterKind::ALL
        .iter()
        .map(|k| (k.name().to_owned(), k.admin_url_env().map(str::to_owned)))
        .collect();
    assert_eq!(in_docs, in_code, "docs/adapters.md, the variables");
    for (row, kind) in rows.iter().zip(AdapterKind::ALL) {
        assert_eq!(
            row[2].starts_with("a managed"),
            kind.server().is_some(),
            "{row:?}"
        );
    }

    let readme = read("README.md");
    let rows = table(
        &readme,
        "| names | a world's slice | own credentials | clone | managed server | tested against |",
    );
    let mut by_name: Vec<(Vec<String>, bool, bool)> = rows
        .iter()
        .map(|r| {
            (
                listed(&r[0]),
                r[3].starts_with("yes"),
                r[4].starts_with("yes"),
            )
        })
        .collect();
    by_name.sort();
    let mut in_code: Vec<(Vec<String>, bool, bool)> = AdapterKind::ALL
        .iter()
        .map(|k| {
            (
                k.names().iter().map(|n| (*n).to_owned()).collect(),
                k.can_clone(),
                k.server().is_some(),
            )
        })
        .collect();
    in_code.sort();
    assert_eq!(by_name, in_code, "README.md: names, clone, managed server");
}
