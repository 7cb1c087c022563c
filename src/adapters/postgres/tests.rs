//! Unit tests of the postgres adapter.

use super::*;
use crate::adapters::testing::{cfg, slice};

#[test]
fn slice_url_keeps_host_and_safe_params_and_drops_admin_credentials() {
    let t = Target::parse(
            "postgresql://admin:hunter22@db.local:6543/postgres?sslmode=disable&user=x&password=y&connect_timeout=3",
        )
        .unwrap();
    let a = t.slice_address(&slice("bk_a_b_db", "s'e:c/r@t"));
    assert_eq!(
            a.url,
            "postgresql://bk_a_b_db:s%27e%3Ac%2Fr%40t@db.local:6543/bk_a_b_db?sslmode=disable&connect_timeout=3"
        );
    assert_eq!(a.tokens["host"], "db.local");
    assert_eq!(a.tokens["port"], "6543");
    assert_eq!(a.tokens["database"], "bk_a_b_db");
    assert_eq!(a.tokens["user"], "bk_a_b_db");
    assert_eq!(a.tokens["password"], "s'e:c/r@t");
    assert!(!a.url.contains("hunter22") && !a.url.contains("admin"));
}

#[test]
fn tls_admin_urls_are_refused_with_a_message() {
    for mode in ["require", "verify-ca", "verify-full"] {
        let err = Target::parse(&format!("postgres://u:pw123@h/postgres?sslmode={mode}"))
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(matches!(err, AdapterError::Config(_)));
        assert!(
            text.contains("TLS to the admin server is not supported yet"),
            "{text}"
        );
        assert!(!text.contains("pw123"), "{text}");
    }
    assert!(Target::parse("postgres://u:p@h/postgres?sslmode=prefer").is_ok());
}

#[test]
fn bad_admin_urls_are_config_errors_without_the_password() {
    for url in [
        "mysql://u:pw123@h/x",
        "u:pw123@h",
        "postgres://u:pw123@h:notaport/x",
    ] {
        let err = admin_url(&cfg(url)).and_then(Target::parse).err().unwrap();
        assert!(matches!(err, AdapterError::Config(_)), "{url}: {err}");
        assert!(!err.to_string().contains("pw123"), "{err}");
    }
    let err = admin_url(&AdapterConfig::default()).err().unwrap();
    assert!(err.to_string().contains("admin_url"), "{err}");
}

#[test]
fn scrubbing_hides_every_secret() {
    let s = Scrub::new(["topsecret", "", "ab"]);
    assert_eq!(s.apply("x topsecret y ab"), "x *** y ab");
}

#[test]
fn names_longer_than_postgres_allows_are_refused() {
    assert!(check_name(&"a".repeat(63)).is_ok());
    assert!(check_name(&"a".repeat(64)).is_err());
    assert!(check_name("").is_err());
    assert!(check_slice(&slice("bk_x", "")).is_err());
}

#[test]
fn a_template_is_copied_by_wal_log_below_the_crossover_on_a_server_that_syncs_else_by_file_copy() {
    assert_eq!(Strategy::for_template(8 << 20, true), Strategy::WalLog);
    assert_eq!(
        Strategy::for_template(FILE_COPY_FROM - 1, true),
        Strategy::WalLog
    );
    assert_eq!(
        Strategy::for_template(FILE_COPY_FROM, true),
        Strategy::FileCopy
    );
    assert_eq!(Strategy::for_template(8 << 20, false), Strategy::FileCopy);
}
