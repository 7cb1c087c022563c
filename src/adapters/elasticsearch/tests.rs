//! Unit tests of the elasticsearch adapter.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::super::http_fake::{cfg, FakeServer, Recorded};
use super::*;

fn slice() -> Slice {
    Slice {
        name: "bk_acme_login_fix_search".into(),
        secret: "0123abcd".into(),
    }
}

fn call(line: &str, body: Value) -> (String, Value) {
    (line.to_owned(), body)
}

#[test]
fn prefixes_and_index_names_follow_the_index_rules() {
    assert_eq!(prefix(&slice()).expect("ok"), "bk_acme_login_fix_search");
    for bad in [
        "_bk",
        "bk-a",
        "bk_A",
        "bk a",
        "",
        "products",
        &"bk_".repeat(22),
    ] {
        let s = Slice {
            name: bad.into(),
            secret: String::new(),
        };
        assert!(prefix(&s).is_err(), "{bad}");
    }
    let c = |v: &str| declared_indices(&cfg("http://h", &[("indices", v)]), "bk_p");
    assert_eq!(
        c(" products, orders ,").expect("ok"),
        ["bk_p-products", "bk_p-orders"]
    );
    for bad in ["Products", "a b", "a*", "a,b/c", "x#"] {
        assert!(c(bad).is_err(), "{bad}");
    }
    assert!(c(&"x".repeat(251)).is_err(), "too long");
    assert!(owned("bk_a", "bk_a"));
    assert!(owned("bk_a", "bk_a-x"));
    assert!(!owned("bk_a", "bk_ab-x"));
    assert!(!owned("bk_a", "bk_a_b-x"));
}

/// A scripted stand-in for a cluster (not Elasticsearch or OpenSearch): indices in a
/// set, answers shaped like the documented REST API.
fn scripted(
    distribution: Option<&'static str>,
    security: bool,
) -> impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static {
    let indices = Arc::new(Mutex::new(BTreeSet::from([
        "bk_acme_login_fix_search-old".to_owned(),
        "bk_acme_login_fix_search_other-x".to_owned(),
        "bk_acme_checkout_search-products".to_owned(),
    ])));
    // binky's catalog: slice → home.
    let catalog = Arc::new(Mutex::new(
        std::collections::BTreeMap::<String, String>::new(),
    ));
    move |req: &Recorded| {
        let mut set = indices.lock().expect("lock");
        let path = req.path.split('?').next().unwrap_or("");
        let whoami = path == "/_security/_authenticate" || path == "/_plugins/_security/authinfo";
        let mut catalog = catalog.lock().expect("lock");
        if let Some(rest) = path.strip_prefix("/binky_catalog/") {
            if !set.contains("binky_catalog") {
                return (
                    404,
                    r#"{"error":{"type":"index_not_found_exception"}}"#.into(),
                );
            }
            let body: Value = serde_json::from_str(&req.body).unwrap_or_default();
            let missing = (404, r#"{"found":false}"#.to_owned());
            return match (req.method.as_str(), rest.split_once('/')) {
                ("PUT", Some(("_create", id))) if catalog.contains_key(id) => (
                    409,
                    r#"{"error":{"type":"version_conflict_engine_exception"}}"#.into(),
                ),
                ("PUT", Some(("_create", id))) => {
                    let home = body["home"].as_str().unwrap_or("").to_owned();
                    catalog.insert(id.to_owned(), home);
                    (201, r#"{"result":"created"}"#.into())
                }
                ("GET", Some(("_doc", id))) => match catalog.get(id) {
                    Some(h) => (
                        200,
                        format!(r#"{{"found":true,"_source":{{"home":"{h}"}}}}"#),
                    ),
                    None => missing,
                },
                ("DELETE", Some(("_doc", id))) if catalog.remove(id).is_some() => {
                    (200, r#"{"result":"deleted"}"#.into())
                }
                ("DELETE", _) => missing,
                _ => (400, "{}".into()),
            };
        }
        match (req.method.as_str(), path) {
            ("GET", "/") => {
                let version = match distribution {
                    Some(d) => format!(r#"{{"number":"2.15.0","distribution":"{d}"}}"#),
                    None => r#"{"number":"8.15.0"}"#.to_owned(),
                };
                (200, format!(r#"{{"version":{version}}}"#))
            }
            ("GET", _) if whoami && security => (200, r#"{"username":"x"}"#.into()),
            ("GET", _) if whoami => (
                500,
                r#"{"error":{"reason":"Security must be explicitly enabled"}}"#.into(),
            ),
            ("GET", p) if p.starts_with("/_cat/indices/") => {
                let pattern = p["/_cat/indices/".len()..].trim_end_matches('*');
                let rows: Vec<String> = set
                    .iter()
                    .filter(|i| i.starts_with(pattern))
                    .map(|i| format!(r#"{{"index":"{i}"}}"#))
                    .collect();
                (200, format!("[{}]", rows.join(",")))
            }
            ("PUT", p) if p.starts_with("/_") => (200, r#"{"created":true}"#.into()),
            ("DELETE", p) if p.starts_with("/_") => (404, r#"{"found":false}"#.into()),
            ("PUT", "/binky_catalog") if set.contains("binky_catalog") => (
                400,
                r#"{"error":{"type":"resource_already_exists_exception"}}"#.into(),
            ),
            ("PUT", p) => {
                set.insert(p[1..].to_owned());
                (200, r#"{"acknowledged":true}"#.into())
            }
            ("DELETE", p) if set.remove(&p[1..]) => (200, r#"{"acknowledged":true}"#.into()),
            ("DELETE", _) => (
                404,
                r#"{"error":{"type":"index_not_found_exception"}}"#.into(),
            ),
            _ => (400, "{}".into()),
        }
    }
}

#[tokio::test]
async fn provision_and_teardown_on_secured_elasticsearch_scripted_server() {
    let fake = FakeServer::start(scripted(None, true)).await;
    let url = fake.url.replace("http://", "http://elastic:pw@");
    let c = cfg(&url, &[("indices", "products,old")]);
    Elasticsearch
        .provision(&slice(), &c)
        .await
        .expect("provision");
    let addr = Elasticsearch.resolve(&slice(), &c).await.expect("resolve");
    // Completed, the slice gives every documented token, the server's host and port.
    let done = crate::adapters::tokens::complete("elasticsearch", addr.clone());
    let keys: Vec<&str> = done.tokens.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        crate::adapters::tokens::documented("elasticsearch").unwrap()
    );
    assert_eq!(done.tokens["host"], "127.0.0.1");
    assert_eq!(
        Some(done.tokens["port"].as_str()),
        fake.url.rsplit(':').next()
    );
    assert_eq!(
        Elasticsearch.exists(&slice(), &c).await.expect("exists"),
        Some(true)
    );
    Elasticsearch
        .teardown(&slice(), &c)
        .await
        .expect("teardown");
    let p = "bk_acme_login_fix_search";
    let list = format!("GET /_cat/indices/{p}*?format=json&h=index");
    assert_eq!(
        fake.calls(),
        [
            call("GET /", Value::Null),
            call("GET /_security/_authenticate", Value::Null),
            call(
                &format!("PUT /_security/role/{p}"),
                json!({
                    "cluster": [],
                    "indices": [{"names": [p, format!("{p}-*")], "privileges": ["all"]}],
                    "metadata": {"binky": "slice"},
                })
            ),
            call(
                &format!("PUT /_security/user/{p}"),
                json!({"password": "0123abcd", "roles": [p], "metadata": {"binky": "slice"}})
            ),
            call(&list, Value::Null),
            call(&format!("PUT /{p}-products"), json!({})),
            // resolve
            call("GET /", Value::Null),
            call("GET /_security/_authenticate", Value::Null),
            // exists
            call(&list, Value::Null),
            // teardown: user, role, then each index by its exact name
            call("GET /", Value::Null),
            call("GET /_security/_authenticate", Value::Null),
            call(&format!("DELETE /_security/user/{p}"), Value::Null),
            call(&format!("DELETE /_security/role/{p}"), Value::Null),
            call(&list, Value::Null),
            call(&format!("DELETE /{p}-old"), Value::Null),
            call(&format!("DELETE /{p}-products"), Value::Null),
            // and the mark of the home that made it, last
            call(&format!("DELETE /binky_catalog/_doc/{p}"), Value::Null),
        ]
    );
    let reqs = fake.requests();
    // The probe goes as the slice's user, everything else as admin.
    assert_eq!(
        reqs[0].header("authorization"),
        Some("Basic ZWxhc3RpYzpwdw==")
    );
    assert_ne!(
        reqs[7].header("authorization"),
        reqs[0].header("authorization")
    );
    let port = fake.url.rsplit(':').next().expect("port");
    assert_eq!(
        addr.url,
        format!("http://{p}:0123abcd@127.0.0.1:{port}/{p}")
    );
    assert_eq!(addr.tokens["prefix"], p);
    assert_eq!(
        addr.tokens["endpoint"],
        format!("http://{p}:0123abcd@127.0.0.1:{port}")
    );
    // The neighbours with a longer name were never touched.
    assert_eq!(
        Elasticsearch.list(&c).await.expect("list"),
        ["bk_acme_checkout_search", "bk_acme_login_fix_search_other"]
    );
}

#[tokio::test]
async fn opensearch_uses_its_security_plugins_api_scripted_server() {
    let fake = FakeServer::start(scripted(Some("opensearch"), true)).await;
    let c = cfg(&fake.url.replace("http://", "http://admin:pw@"), &[]);
    Elasticsearch
        .provision(&slice(), &c)
        .await
        .expect("provision");
    Elasticsearch
        .teardown(&slice(), &c)
        .await
        .expect("teardown");
    let p = "bk_acme_login_fix_search";
    let api = "/_plugins/_security/api";
    assert_eq!(
        fake.calls(),
        [
            call("GET /", Value::Null),
            call("GET /_plugins/_security/authinfo", Value::Null),
            call(
                &format!("PUT {api}/roles/{p}"),
                json!({
                    "cluster_permissions": ["cluster_composite_ops"],
                    "index_permissions": [{
                        "index_patterns": [p, format!("{p}-*")],
                        "allowed_actions": ["indices_all"],
                    }],
                })
            ),
            call(
                &format!("PUT {api}/internalusers/{p}"),
                json!({"password": "Bk_0123abcd", "attributes": {"binky": "slice"}})
            ),
            call(
                &format!("PUT {api}/rolesmapping/{p}"),
                json!({"users": [p]})
            ),
            call("GET /", Value::Null),
            call("GET /_plugins/_security/authinfo", Value::Null),
            call(&format!("DELETE {api}/internalusers/{p}"), Value::Null),
            call(&format!("DELETE {api}/rolesmapping/{p}"), Value::Null),
            call(&format!("DELETE {api}/roles/{p}"), Value::Null),
            call(
                &format!("GET /_cat/indices/{p}*?format=json&h=index"),
                Value::Null
            ),
            call(&format!("DELETE /{p}-old"), Value::Null),
            call(&format!("DELETE /binky_catalog/_doc/{p}"), Value::Null),
        ]
    );
}

#[tokio::test]
async fn without_security_the_world_gets_admin_urls_address_scripted_server() {
    let fake = FakeServer::start(scripted(None, false)).await;
    let c = cfg(&fake.url, &[]);
    Elasticsearch
        .provision(&slice(), &c)
        .await
        .expect("provision");
    let addr = Elasticsearch.resolve(&slice(), &c).await.expect("resolve");
    let port = fake.url.rsplit(':').next().expect("port");
    assert_eq!(
        addr.url,
        format!("http://127.0.0.1:{port}/bk_acme_login_fix_search")
    );
    assert!(!fake.lines().iter().any(|l| l.contains("/_security/role")));
    // An API key replaces admin_url's user and password.
    let keyed = cfg(
        &fake.url.replace("http://", "http://u:pw@"),
        &[("api_key", "k3y")],
    );
    Elasticsearch
        .provision(&slice(), &keyed)
        .await
        .expect("provision");
    let last = fake.requests().pop().expect("a request");
    assert_eq!(last.header("authorization"), Some("ApiKey k3y"));
}

#[tokio::test]
async fn a_deleted_index_that_is_already_gone_is_fine() {
    // The listing still shows an index that a DELETE then finds gone (404).
    let fake = FakeServer::start(|req: &Recorded| match req.method.as_str() {
        "GET" if req.path == "/" => (200, r#"{"version":{"number":"7.17.0"}}"#.into()),
        "GET" if req.path.starts_with("/_cat/") => {
            (200, r#"[{"index":"bk_acme_login_fix_search-a"}]"#.into())
        }
        "GET" => (500, "{}".into()),
        _ => (
            404,
            r#"{"error":{"type":"index_not_found_exception"}}"#.into(),
        ),
    })
    .await;
    Elasticsearch
        .teardown(&slice(), &cfg(&fake.url, &[]))
        .await
        .expect("404 on delete is already gone");
}

#[tokio::test]
async fn refused_credentials_name_the_settings_and_a_closed_port_is_unreachable() {
    let fake = FakeServer::start(|_: &Recorded| {
        (401, r#"{"error":{"type":"security_exception"}}"#.into())
    })
    .await;
    let c = cfg(&fake.url.replace("http://", "http://elastic:wrongpw@"), &[]);
    let err = Elasticsearch
        .provision(&slice(), &c)
        .await
        .expect_err("401");
    let text = err.to_string();
    assert!(err.transient(), "{text}");
    assert!(
        text.contains("admin_url") && text.contains("options.api_key"),
        "{text}"
    );
    assert!(!text.contains("wrongpw"), "{text}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let closed = cfg(&format!("http://127.0.0.1:{port}"), &[]);
    for err in [
        Elasticsearch
            .provision(&slice(), &closed)
            .await
            .expect_err("closed"),
        Elasticsearch
            .teardown(&slice(), &closed)
            .await
            .expect_err("closed"),
        Elasticsearch
            .resolve(&slice(), &closed)
            .await
            .expect_err("closed"),
    ] {
        assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
    }
}

#[tokio::test]
async fn an_admin_without_security_rights_shares_its_credentials_scripted_server() {
    let fake = FakeServer::start(|req: &Recorded| match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/") => (200, r#"{"version":{"number":"8.15.0"}}"#.into()),
            // The admin authenticates; the slice's user does not exist.
            ("GET", "/_security/_authenticate")
                if req.header("authorization") == Some("Basic dTpwdw==") =>
            {
                (200, "{}".into())
            }
            ("GET", "/_security/_authenticate") => (401, "{}".into()),
            ("PUT", _) => (
                403,
                r#"{"error":{"type":"security_exception","reason":"action [cluster:admin/xpack/security/role/put] is unauthorized"}}"#.into(),
            ),
            _ => (200, "[]".into()),
        })
        .await;
    let c = cfg(&fake.url.replace("http://", "http://u:pw@"), &[]);
    Elasticsearch
        .provision(&slice(), &c)
        .await
        .expect("provision");
    let addr = Elasticsearch.resolve(&slice(), &c).await.expect("resolve");
    assert!(addr.url.starts_with("http://u:pw@"), "{}", addr.url);
}

#[tokio::test]
async fn the_first_home_to_claim_a_slice_is_recorded_and_the_mark_goes_with_it_scripted_server() {
    let fake = FakeServer::start(scripted(None, true)).await;
    let c = cfg(&fake.url.replace("http://", "http://elastic:pw@"), &[]);
    let s = slice();
    // Its world made `<prefix>-old` before homes marked their slices: there, unmarked.
    assert_eq!(
        Elasticsearch.maker(&s, &c).await.expect("maker"),
        Maker::Unmarked
    );
    let a = Maker::Home("aaaaaaaa".into());
    assert_eq!(
        Elasticsearch
            .claim(&s, &c, "aaaaaaaa")
            .await
            .expect("claim"),
        a
    );
    assert_eq!(
        Elasticsearch
            .claim(&s, &c, "bbbbbbbb")
            .await
            .expect("claim"),
        a,
        "a second home's claim took the slice"
    );
    assert_eq!(Elasticsearch.maker(&s, &c).await.expect("maker"), a);
    let creates: Vec<(String, Value)> = fake
        .calls()
        .into_iter()
        .filter(|(line, _)| line.contains("/_create/"))
        .collect();
    assert_eq!(
        creates,
        [
            call(
                "PUT /binky_catalog/_create/bk_acme_login_fix_search?refresh=true",
                json!({"home": "aaaaaaaa"})
            ),
            call(
                "PUT /binky_catalog/_create/bk_acme_login_fix_search?refresh=true",
                json!({"home": "bbbbbbbb"})
            ),
        ]
    );
    // The catalog is no slice's prefix.
    assert_eq!(
        Elasticsearch.list(&c).await.expect("list"),
        [
            "bk_acme_checkout_search",
            "bk_acme_login_fix_search",
            "bk_acme_login_fix_search_other"
        ]
    );
    Elasticsearch.teardown(&s, &c).await.expect("teardown");
    assert_eq!(
        Elasticsearch.maker(&s, &c).await.expect("maker"),
        Maker::Absent
    );
    assert_eq!(
        Elasticsearch
            .claim(&s, &c, "bbbbbbbb")
            .await
            .expect("claim"),
        Maker::Home("bbbbbbbb".into())
    );
    assert!(Elasticsearch.claim(&s, &c, "x'; drop").await.is_err());
}
