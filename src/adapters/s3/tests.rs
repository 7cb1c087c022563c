//! Unit tests of the s3 adapter.

use super::*;

fn slice(name: &str) -> Slice {
    Slice {
        name: name.into(),
        secret: "unused".into(),
    }
}

fn cfg(url: Option<&str>, options: &[(&str, &str)]) -> AdapterConfig {
    AdapterConfig {
        admin_url: url.map(str::to_owned),
        options: options
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        buckets: vec![],
        ..AdapterConfig::default()
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn bucket_names_follow_s3_rules_and_map_back_to_their_slice() {
    assert_eq!(
        bucket_name("bk_acme_login_fix_files"),
        "bk-acme-login-fix-files"
    );
    assert_eq!(
        slice_of_bucket("bk-acme-login-fix-files").as_deref(),
        Some("bk_acme_login_fix_files")
    );
    for name in [
        "bk_acme_w_s3alias",
        "bk_acme_w__ol_s3",
        "bk_x_",
        "bk_files__",
        "bk",
        &format!("bk_{}", "p".repeat(70)),
    ] {
        let b = bucket_name(name);
        assert!((3..=63).contains(&b.len()), "{b}");
        assert!(
            b.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'),
            "{b}"
        );
        assert!(!b.starts_with('-') && !b.ends_with('-'), "{b}");
        assert!(!RESERVED_SUFFIXES.iter().any(|s| b.ends_with(s)), "{b}");
        if name.starts_with("bk_") && name.len() <= 63 {
            assert_eq!(slice_of_bucket(&b).as_deref(), Some(name), "{b}");
        }
    }
    assert_ne!(
        bucket_name("bk_acme_w_s3alias"),
        bucket_name("bk_acme_w_s3alias_")
    );
    assert_eq!(slice_of_bucket("photos"), None);
}

#[test]
fn admin_url_gives_endpoint_and_keys_and_options_fill_the_rest() {
    let s = Settings::from_config(
        &cfg(
            Some("http://AKID:se%2Fcret@127.0.0.1:9000/"),
            &[("region", "eu-west-1")],
        ),
        &no_env,
    )
    .unwrap();
    assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
    assert_eq!(s.access_key_id, "AKID");
    assert_eq!(s.secret_access_key, "se/cret");
    assert_eq!(s.region, "eu-west-1");
    assert_eq!(
        s.place(&slice("bk_a_b_files")),
        Place::Bucket("bk-a-b-files".into())
    );

    // binky 0.1.2's option names, and the environment as the last resort.
    let env = |k: &str| match k {
        "AWS_DEFAULT_REGION" => Some("ap-south-1".to_owned()),
        "AWS_ACCESS_KEY_ID" => Some("ENVKEY".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some("envsecret".to_owned()),
        _ => None,
    };
    let s = Settings::from_config(
        &cfg(
            None,
            &[
                ("endpoint_url", "http://minio:9000/"),
                ("access_key", "OLD"),
                ("secret_key", "oldsecret"),
                ("bucket", "shared"),
            ],
        ),
        &env,
    )
    .unwrap();
    assert_eq!(s.endpoint.as_deref(), Some("http://minio:9000"));
    assert_eq!(
        (s.access_key_id.as_str(), s.region.as_str()),
        ("OLD", "ap-south-1")
    );
    assert_eq!(
        s.place(&slice("bk_a_b_files")),
        Place::Prefix {
            bucket: "shared".into(),
            prefix: "bk_a_b_files/".into()
        }
    );
    let s = Settings::from_config(&cfg(None, &[]), &env).unwrap();
    assert_eq!(s.endpoint, None);
    assert_eq!(s.shown(), "https://s3.ap-south-1.amazonaws.com");
    assert_eq!(s.access_key_id, "ENVKEY");
}

#[test]
fn missing_keys_and_bad_settings_name_the_fix_without_the_secret() {
    let e = Settings::from_config(&cfg(Some("http://127.0.0.1:9000"), &[]), &no_env)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("ACCESS_KEY:SECRET") && e.contains("AWS_ACCESS_KEY_ID"),
        "{e}"
    );
    let e = Settings::from_config(&cfg(Some("ftp://AK:topsecret@h"), &[]), &no_env)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("http://ACCESS_KEY:SECRET@HOST:PORT"), "{e}");
    assert!(!e.contains("topsecret"), "{e}");
    let e = Settings::from_config(
        &cfg(Some("http://AK:topsecret@h"), &[("bucket", "Bad_Name")]),
        &no_env,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("options.bucket") && !e.contains("topsecret"),
        "{e}"
    );
}

#[test]
fn the_address_is_0_1_2s_s3_url_plus_what_a_client_needs() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let a = rt
        .block_on(S3.resolve(
            &slice("bk_acme_w_files"),
            &cfg(Some("http://AK:sk@127.0.0.1:9000"), &[]),
        ))
        .unwrap();
    assert_eq!(a.url, "s3://bk-acme-w-files");
    assert_eq!(a.tokens["bucket"], "bk-acme-w-files");
    assert_eq!(a.tokens["prefix"], "");
    assert_eq!(a.tokens["endpoint"], "http://127.0.0.1:9000");
    assert_eq!(a.tokens["region"], "us-east-1");
    assert_eq!(a.tokens["access_key_id"], "AK");
    assert_eq!(a.tokens["secret_access_key"], "sk");
    let a = rt
        .block_on(S3.resolve(
            &slice("bk_acme_w_files"),
            &cfg(Some("https://AK:sk@s3.example"), &[("bucket", "shared")]),
        ))
        .unwrap();
    assert_eq!(a.url, "s3://shared/bk_acme_w_files/");
    assert_eq!(a.tokens["prefix"], "bk_acme_w_files/");
    assert_eq!(a.tokens["endpoint"], "https://s3.example");
    let e = rt
        .block_on(S3.resolve(&slice("bk_a/../b"), &cfg(Some("http://AK:sk@h"), &[])))
        .unwrap_err();
    assert!(matches!(e, AdapterError::Config(_)), "{e}");
}
