//! Unit tests of the mysql adapter.

use super::*;
use crate::adapters::testing::{cfg, slice};

#[test]
fn slice_url_keeps_host_and_harmless_params_and_drops_admin_credentials() {
    let t = Target::parse(
        "mysql://root:hunter22@db.local:3307/mysql?charset=utf8mb4&user=x&password=y",
    )
    .unwrap();
    let a = t.slice_address(&slice("bk_a_b_db", "s'e:c/r@t"));
    assert_eq!(
        a.url,
        "mysql://bk_a_b_db:s%27e%3Ac%2Fr%40t@db.local:3307/bk_a_b_db?charset=utf8mb4"
    );
    assert_eq!(a.tokens["host"], "db.local");
    assert_eq!(a.tokens["port"], "3307");
    assert_eq!(a.tokens["database"], "bk_a_b_db");
    assert_eq!(a.tokens["user"], "bk_a_b_db");
    assert_eq!(a.tokens["password"], "s'e:c/r@t");
    assert!(!a.url.contains("hunter22") && !a.url.contains("root"));
    assert_eq!(t.server, "mysql://db.local:3307");
}

#[test]
fn the_port_defaults_to_3306_and_ipv6_hosts_keep_their_brackets() {
    let t = Target::parse("mariadb://root:pw@[::1]/").unwrap();
    assert_eq!((t.host.as_str(), t.port), ("[::1]", 3306));
    let a = t.slice_address(&slice("bk_x", "pw2"));
    assert_eq!(a.url, "mariadb://bk_x:pw2@[::1]:3306/bk_x");
    assert_eq!(a.tokens["host"], "::1");
    let t = Target::parse("mysql+pymysql://root@127.0.0.1:3310").unwrap();
    assert_eq!(t.port, 3310);
    assert_eq!(t.password, "");
    assert!(t
        .slice_address(&slice("bk_x", "pw2"))
        .url
        .starts_with("mysql+pymysql://"));
}

#[test]
fn long_slice_names_get_user_names_that_fit_32_characters() {
    let name = format!("bk_{}_feature_db", "p".repeat(40));
    let t = Target::parse("mysql://root:pw@h").unwrap();
    let a = t.slice_address(&slice(&name, "secret"));
    assert_eq!(a.tokens["user"].len(), 32);
    assert_eq!(a.tokens["database"], name);
    assert_eq!(account(&name), format!("'{}'@'%'", a.tokens["user"]));
}

#[test]
fn tls_admin_urls_are_refused_with_a_message() {
    for q in [
        "ssl-mode=REQUIRED",
        "sslmode=require",
        "ssl_mode=VERIFY_IDENTITY",
        "require_ssl=true",
        "ssl=true",
        "tls=1",
    ] {
        let err = Target::parse(&format!("mysql://u:pw123@h/x?{q}")).unwrap_err();
        assert!(matches!(err, AdapterError::Config(_)), "{q}: {err:?}");
        assert!(err.to_string().contains("TLS"), "{err}");
        assert!(!err.to_string().contains("pw123"), "{err}");
    }
    assert!(Target::parse("mysql://u:p@h/x?ssl-mode=DISABLED").is_ok());
    assert!(Target::parse("mysql://u:p@h/x?ssl=false").is_ok());
}

#[test]
fn bad_admin_urls_are_config_errors_without_the_password() {
    for url in [
        "postgres://u:pw123@h/x",
        "u:pw123@h",
        "mysql://u:pw123@h:notaport/x",
        "mysql://:pw123@h/x",
        "mysql://u:pw123@h:0/x",
    ] {
        let err = admin_url(&cfg(url))
            .and_then(|u| Target::parse(&u))
            .unwrap_err();
        assert!(matches!(err, AdapterError::Config(_)), "{url}: {err}");
        assert!(!err.to_string().contains("pw123"), "{err}");
    }
}

#[test]
fn names_outside_a_z_0_9_underscore_are_refused_before_any_sql() {
    assert!(check_name("bk_ok_1").is_ok());
    assert!(check_name(&"a".repeat(64)).is_ok());
    for bad in ["", "bk_X", "bk-x", "bk_x`; drop", "bk x", &"a".repeat(65)] {
        assert!(check_name(bad).is_err(), "{bad}");
    }
    assert!(check_slice(&slice("bk_x", "")).is_err());
    assert!(check_slice(&slice("bk_x", "a\0b")).is_err());
}

#[test]
fn literals_and_identifiers_are_quoted() {
    assert_eq!(quote_literal(r"it's \ x"), r"'it\'s \\ x'");
    assert_eq!(quote_ident("we`ird"), "`we``ird`");
}

#[test]
fn grants_escape_wildcards_unless_the_server_takes_names_literally() {
    let grant = |literal| {
        if literal {
            quote_ident("bk_a_db")
        } else {
            quote_ident(&"bk_a_db".replace('_', "\\_"))
        }
    };
    assert_eq!(grant(false), r"`bk\_a\_db`");
    assert_eq!(grant(true), "`bk_a_db`");
}

#[test]
fn definers_become_the_copys_user() {
    assert_eq!(
            with_definer(
                "CREATE ALGORITHM=UNDEFINED DEFINER=`bk_t`@`%` SQL SECURITY DEFINER VIEW `v` AS select 1",
                "bk_c"
            ),
            "CREATE ALGORITHM=UNDEFINED DEFINER=`bk_c`@`%` SQL SECURITY DEFINER VIEW `v` AS select 1"
        );
    assert_eq!(
        with_definer("CREATE DEFINER='root'@'localhost' TRIGGER t", "bk_c"),
        "CREATE DEFINER=`bk_c`@`%` TRIGGER t"
    );
    assert_eq!(
        with_definer("CREATE DEFINER=CURRENT_USER() PROCEDURE p()", "bk_c"),
        "CREATE DEFINER=`bk_c`@`%` PROCEDURE p()"
    );
    assert_eq!(
        with_definer("CREATE TRIGGER t BEFORE INSERT", "bk_c"),
        "CREATE DEFINER=`bk_c`@`%` TRIGGER t BEFORE INSERT"
    );
}

#[test]
fn the_templates_schema_name_becomes_the_copys() {
    assert_eq!(
        replace_schema(
            "select `bk_t`.`a`.`x` from `bk_t`.`a` join bk_t.b join xbk_t.c",
            "bk_t",
            "bk_c"
        ),
        "select `bk_c`.`a`.`x` from `bk_c`.`a` join `bk_c`.b join xbk_t.c"
    );
}

#[test]
fn the_environment_gives_the_admin_url_when_the_service_has_none() {
    let env = Some("mysql://root:envpw@127.0.0.1:3399".to_owned());
    assert_eq!(
        admin_url_or(&AdapterConfig::default(), env.clone()).unwrap(),
        "mysql://root:envpw@127.0.0.1:3399"
    );
    assert_eq!(
        admin_url_or(&cfg("mysql://root:x@h:1"), env).unwrap(),
        "mysql://root:x@h:1"
    );
    let err = admin_url_or(&AdapterConfig::default(), Some(" ".into())).unwrap_err();
    assert!(err.to_string().contains("admin_url = "), "{err}");
    assert!(err.to_string().contains(ENV_URL), "{err}");
}

#[test]
fn bad_charset_options_are_refused() {
    let mut c = AdapterConfig::default();
    c.options.insert("charset".into(), "utf8mb4".into());
    c.options
        .insert("collation".into(), "utf8mb4_unicode_ci".into());
    assert_eq!(
        DbCharset::from_options(&c).unwrap().clause(),
        " CHARACTER SET `utf8mb4` COLLATE `utf8mb4_unicode_ci`"
    );
    c.options.insert("charset".into(), "utf8; drop".into());
    assert!(DbCharset::from_options(&c).is_err());
}

#[test]
fn sha1_and_the_native_password_hash_match_known_values() {
    let hex = |b: [u8; 20]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(hex(sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert_eq!(
        hex(sha1(b"abc")),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
    assert_eq!(
        hex(sha1(
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        )),
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
    );
    assert_eq!(
        hex(sha1(&[b'a'; 1000])),
        "291e9a6c66994949b57ba5e650361e98fc36b1ba"
    );
    // MariaDB 10.11's PASSWORD('pw-x').
    assert_eq!(
        native_password_hash("pw-x"),
        "*59E479B0285D34ED6888EA8E73D8B0F3D09D70E4"
    );
}

#[test]
fn scrubbing_hides_every_secret() {
    let s = Scrub::new(["topsecret", "", "ab"]);
    assert_eq!(s.apply("x topsecret y ab"), "x *** y ab");
    assert_eq!(
        binky_controllers::url::password("mysql://u:a%40b@h/x"),
        Some("a%40b")
    );
}
