//! Unit tests of the qdrant adapter.

use std::sync::{Arc, Mutex};

use super::super::http_fake::{cfg, FakeServer, Recorded};
use super::*;

fn slice() -> Slice {
    Slice {
        name: "bk_acme_login_fix_vec".into(),
        secret: "0123abcd".into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn hmac_sha256_matches_rfc_4231() {
    let cases: [(Vec<u8>, Vec<u8>, &str); 6] = [
        (
            vec![0x0b; 20],
            b"Hi There".to_vec(),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        ),
        (
            b"Jefe".to_vec(),
            b"what do ya want for nothing?".to_vec(),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        (
            vec![0xaa; 20],
            vec![0xdd; 50],
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
        ),
        (
            (1..=25).collect(),
            vec![0xcd; 50],
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
        ),
        (
            vec![0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        ),
        (
            vec![0xaa; 131],
            b"This is a test using a larger than block-size key and a larger than \
                  block-size data. The key needs to be hashed before being used by the \
                  HMAC algorithm."
                .to_vec(),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
        ),
    ];
    for (key, data, mac) in cases {
        assert_eq!(hex(&hmac_sha256(&key, &data)), mac);
    }
}

#[test]
fn base64url_has_no_padding_and_url_safe_letters() {
    assert_eq!(base64url(b""), "");
    assert_eq!(base64url(b"f"), "Zg");
    assert_eq!(base64url(b"fo"), "Zm8");
    assert_eq!(base64url(b"foo"), "Zm9v");
    assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
}

#[test]
fn the_token_is_an_hs256_jwt_scoped_to_the_collection() {
    let token = collection_token("server-key", "bk_acme_login_fix_vec", TOKEN_EXP);
    // Computed independently with Python's hmac and base64 modules.
    assert_eq!(
            token,
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
             eyJhY2Nlc3MiOlt7ImNvbGxlY3Rpb24iOiJia19hY21lX2xvZ2luX2ZpeF92ZWMiLCJhY2Nlc3MiOiJydyJ9XSwiZXhwIjo0MTAyNDQ0ODAwfQ.\
             TI1Vv0BaWzM0fj2JhsoQuk2-VUoLBu-HY3AYj8b5Yb0"
        );
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0], base64url(br#"{"alg":"HS256","typ":"JWT"}"#));
    assert_eq!(
            parts[1],
            base64url(
                br#"{"access":[{"collection":"bk_acme_login_fix_vec","access":"rw"}],"exp":4102444800}"#
            )
        );
    let mac = hmac_sha256(
        b"server-key",
        format!("{}.{}", parts[0], parts[1]).as_bytes(),
    );
    assert_eq!(parts[2], base64url(&mac));
    // Stable: resolving twice gives the same address.
    assert_eq!(
        token,
        collection_token("server-key", "bk_acme_login_fix_vec", TOKEN_EXP)
    );
    assert_ne!(
        token,
        collection_token("server-key", "bk_acme_checkout_vec", TOKEN_EXP)
    );
}

#[test]
fn collection_names_and_options_are_checked() {
    assert_eq!(
        collection(&slice()).expect("valid"),
        "bk_acme_login_fix_vec"
    );
    for bad in ["bk a", "bk/a", "", "products", &"bk_".repeat(86)] {
        let s = Slice {
            name: bad.into(),
            secret: String::new(),
        };
        assert!(collection(&s).is_err(), "{bad}");
    }
    let c = |o: &[(&str, &str)]| vectors(&cfg("http://h", o));
    assert_eq!(c(&[]).expect("ok"), None);
    assert_eq!(
        c(&[("size", "384")]).expect("ok"),
        Some(Vectors {
            size: 384,
            distance: "Cosine"
        })
    );
    assert_eq!(
        c(&[("size", "3"), ("distance", "dot")]).expect("ok"),
        Some(Vectors {
            size: 3,
            distance: "Dot"
        })
    );
    for bad in [
        &[("size", "0")][..],
        &[("size", "x")],
        &[("distance", "cosin")],
    ] {
        let err = c(bad).expect_err("bad option").to_string();
        assert!(err.contains("options."), "{err}");
    }
    assert!(owned("bk_a", "bk_a"));
    assert!(owned("bk_a", "bk_a__emb"));
    assert!(!owned("bk_a", "bk_ab"));
    assert!(!owned("bk_a", "bk_a_b"));
}

/// A scripted stand-in for Qdrant (not Qdrant): collections in a set, answers shaped
/// like Qdrant's documented REST API.
fn scripted(
    admin_key: &'static str,
    rbac: bool,
) -> impl Fn(&Recorded) -> (u16, String) + Send + Sync + 'static {
    let existing = Arc::new(Mutex::new(BTreeSet::from([
        "bk_acme_login_fix_vec__emb".to_owned(),
        "bk_acme_checkout_vec".to_owned(),
    ])));
    // binky's catalog: point id → home.
    let points = Arc::new(Mutex::new(
        std::collections::BTreeMap::<String, String>::new(),
    ));
    move |req: &Recorded| {
        let key = req.header("api-key").unwrap_or("");
        let token_ok = rbac && key.starts_with("eyJ");
        if key != admin_key && !token_ok {
            return (403, r#"{"status":{"error":"Invalid api-key"}}"#.into());
        }
        let mut set = existing.lock().expect("lock");
        let mut points = points.lock().expect("lock");
        let name = req.path.strip_prefix("/collections/").map(str::to_owned);
        let not_found = (404, r#"{"status":{"error":"Not found"}}"#.to_owned());
        if let Some(rest) = name
            .as_deref()
            .and_then(|n| n.strip_prefix("binky_catalog/"))
        {
            if !set.contains("binky_catalog") {
                return not_found;
            }
            let body: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
            return match (req.method.as_str(), rest) {
                ("PUT", "points?wait=true") => {
                    let p = &body["points"][0];
                    let (id, home) = (p["id"].as_str(), p["payload"]["home"].as_str());
                    points.insert(id.unwrap_or("").into(), home.unwrap_or("").into());
                    (200, r#"{"result":{"status":"completed"}}"#.into())
                }
                ("POST", "points/delete?wait=true") => {
                    for id in body["points"].as_array().into_iter().flatten() {
                        points.remove(id.as_str().unwrap_or(""));
                    }
                    (200, r#"{"result":{"status":"completed"}}"#.into())
                }
                ("GET", id) => match points.get(id.strip_prefix("points/").unwrap_or("")) {
                    Some(home) => (
                        200,
                        format!(r#"{{"result":{{"payload":{{"home":"{home}"}}}}}}"#),
                    ),
                    None => not_found,
                },
                _ => (400, "{}".into()),
            };
        }
        match (req.method.as_str(), name) {
            ("GET", None) => {
                let list: Vec<String> =
                    set.iter().map(|n| format!(r#"{{"name":"{n}"}}"#)).collect();
                (
                    200,
                    format!(r#"{{"result":{{"collections":[{}]}}}}"#, list.join(",")),
                )
            }
            ("GET", Some(n)) if set.contains(&n) => (200, r#"{"result":{}}"#.into()),
            ("GET", Some(_)) => (404, r#"{"status":{"error":"Not found"}}"#.into()),
            ("PUT", Some(n)) => {
                set.insert(n);
                (200, r#"{"result":true}"#.into())
            }
            ("DELETE", Some(n)) if set.remove(&n) => (200, r#"{"result":true}"#.into()),
            ("DELETE", Some(_)) => (404, r#"{"status":{"error":"Not found"}}"#.into()),
            _ => (400, "{}".into()),
        }
    }
}

#[tokio::test]
async fn provision_and_teardown_send_exactly_these_requests_scripted_server() {
    let fake = FakeServer::start(scripted("k3y", true)).await;
    let c = cfg(
        &fake.url,
        &[("api_key", "k3y"), ("size", "384"), ("distance", "dot")],
    );
    Qdrant.provision(&slice(), &c).await.expect("provision");
    Qdrant
        .provision(&slice(), &c)
        .await
        .expect("provision again");
    let addr = Qdrant.resolve(&slice(), &c).await.expect("resolve");
    // Completed, the slice gives every documented token, the server's host and port.
    let done = crate::adapters::tokens::complete("qdrant", addr.clone());
    let keys: Vec<&str> = done.tokens.keys().map(String::as_str).collect();
    assert_eq!(keys, crate::adapters::tokens::documented("qdrant").unwrap());
    assert_eq!(done.tokens["host"], "127.0.0.1");
    assert_eq!(
        Some(done.tokens["port"].as_str()),
        fake.url.rsplit(':').next()
    );
    assert_eq!(
        Qdrant.exists(&slice(), &c).await.expect("exists"),
        Some(true)
    );
    Qdrant.teardown(&slice(), &c).await.expect("teardown");
    Qdrant.teardown(&slice(), &c).await.expect("teardown again");
    let none = serde_json::Value::Null;
    let call = |line: &str, body: &serde_json::Value| (line.to_owned(), body.clone());
    // The mark goes last (no catalog on this server: nothing to forget, and fine).
    let forget = "POST /collections/binky_catalog/points/delete?wait=true".to_owned();
    let forget_body = serde_json::json!({"points": [catalog_point("bk_acme_login_fix_vec")]});
    assert_eq!(
        fake.calls(),
        [
            call("GET /collections/bk_acme_login_fix_vec", &none),
            call(
                "PUT /collections/bk_acme_login_fix_vec",
                &serde_json::json!({"vectors": {"size": 384, "distance": "Dot"}})
            ),
            call("GET /collections/bk_acme_login_fix_vec", &none),
            call("GET /collections/bk_acme_login_fix_vec", &none),
            call("GET /collections/bk_acme_login_fix_vec", &none),
            call("GET /collections", &none),
            call("DELETE /collections/bk_acme_login_fix_vec", &none),
            call("DELETE /collections/bk_acme_login_fix_vec__emb", &none),
            call(&forget, &forget_body),
            call("GET /collections", &none),
            call(&forget, &forget_body),
        ]
    );
    let reqs = fake.requests();
    // The admin key on admin calls, the world's token on the probe; never Basic auth.
    assert_eq!(reqs[0].header("api-key"), Some("k3y"));
    let token = collection_token("k3y", "bk_acme_login_fix_vec", TOKEN_EXP);
    assert_eq!(reqs[3].header("api-key"), Some(token.as_str()));
    assert!(reqs.iter().all(|r| r.header("authorization").is_none()));
    let port = fake.url.rsplit(':').next().expect("port");
    assert_eq!(
        addr.url,
        format!("http://127.0.0.1:{port}/bk_acme_login_fix_vec")
    );
    assert_eq!(addr.tokens["collection"], "bk_acme_login_fix_vec");
    assert_eq!(addr.tokens["endpoint"], format!("http://127.0.0.1:{port}"));
    assert_eq!(addr.tokens["api_key"], token);
    // The other world's collection is left alone.
    assert_eq!(
        Qdrant.list(&c).await.expect("list"),
        ["bk_acme_checkout_vec"]
    );
}

#[tokio::test]
async fn a_slice_is_marked_in_binkys_catalog_by_the_first_home_and_the_mark_goes_with_it_scripted_server(
) {
    let fake = FakeServer::start(scripted("k3y", true)).await;
    let c = cfg(&fake.url, &[("api_key", "k3y"), ("size", "8")]);
    let s = slice();
    // Its world made `<slice>__emb` before homes marked their slices: there, unmarked.
    assert_eq!(Qdrant.maker(&s, &c).await.expect("maker"), Maker::Unmarked);
    Qdrant.provision(&s, &c).await.expect("provision");
    let a = Maker::Home("aaaaaaaa".into());
    assert_eq!(Qdrant.claim(&s, &c, "aaaaaaaa").await.expect("claim"), a);
    assert_eq!(Qdrant.claim(&s, &c, "bbbbbbbb").await.expect("claim"), a);
    assert_eq!(Qdrant.maker(&s, &c).await.expect("maker"), a);
    let marked = fake
        .calls()
        .into_iter()
        .find(|(line, _)| line == "PUT /collections/binky_catalog/points?wait=true")
        .expect("the mark is written");
    assert_eq!(
        marked.1,
        serde_json::json!({"points": [{
            "id": catalog_point("bk_acme_login_fix_vec"),
            "vector": [1.0],
            "payload": {"slice": "bk_acme_login_fix_vec", "home": "aaaaaaaa"},
        }]})
    );
    // Not a slice: the catalog is never listed as one.
    assert_eq!(
        Qdrant.list(&c).await.expect("list"),
        ["bk_acme_checkout_vec", "bk_acme_login_fix_vec"]
    );
    Qdrant.teardown(&s, &c).await.expect("teardown");
    assert_eq!(Qdrant.maker(&s, &c).await.expect("maker"), Maker::Absent);
    // A slice made again (by another home) carries that home's mark, none left over.
    assert_eq!(
        Qdrant.claim(&s, &c, "bbbbbbbb").await.expect("claim"),
        Maker::Home("bbbbbbbb".into())
    );
    assert!(Qdrant.claim(&s, &c, "Not-a-home").await.is_err());
}

#[test]
fn catalog_points_are_uuids_one_per_slice() {
    let a = catalog_point("bk_a_w_vec");
    assert_eq!(a.len(), 36);
    assert_eq!(a.matches('-').count(), 4);
    assert_eq!(a, catalog_point("bk_a_w_vec"));
    assert_ne!(a, catalog_point("bk_b_w_vec"));
}

#[tokio::test]
async fn without_a_size_or_rbac_the_world_gets_the_servers_key_scripted_server() {
    let fake = FakeServer::start(scripted("k3y", false)).await;
    // The key in admin_url's password works as options.api_key does.
    let url = fake.url.replace("http://", "http://:k3y@");
    let sized = cfg(&url, &[("size", "8")]);
    Qdrant.provision(&slice(), &sized).await.expect("provision");
    let addr = Qdrant.resolve(&slice(), &sized).await.expect("resolve");
    assert_eq!(addr.tokens["api_key"], "k3y", "rbac off: the server's key");
    assert!(!addr.url.contains("k3y"), "{}", addr.url);

    let fake = FakeServer::start(scripted("k3y", true)).await;
    let unsized_cfg = cfg(&fake.url, &[("api_key", "k3y")]);
    Qdrant
        .provision(&slice(), &unsized_cfg)
        .await
        .expect("provision");
    let addr = Qdrant
        .resolve(&slice(), &unsized_cfg)
        .await
        .expect("resolve");
    assert_eq!(
        addr.tokens["api_key"], "k3y",
        "no collection: the server's key"
    );
    assert_eq!(
        fake.lines()[0],
        "GET /collections",
        "only a reachability check"
    );
    assert_eq!(
        Qdrant.exists(&slice(), &unsized_cfg).await.expect("exists"),
        None
    );

    let fake_open = FakeServer::start(scripted("", false)).await;
    let open = cfg(&fake_open.url, &[]);
    let addr = Qdrant.resolve(&slice(), &open).await.expect("resolve");
    assert_eq!(
        addr.tokens["api_key"], "",
        "no key on the server, none to give"
    );
}

#[tokio::test]
async fn a_refused_key_names_the_setting_and_a_closed_port_is_unreachable() {
    let fake = FakeServer::start(scripted("right-key", false)).await;
    let c = cfg(&fake.url, &[("api_key", "wrong-key")]);
    let err = Qdrant.provision(&slice(), &c).await.expect_err("403");
    let text = err.to_string();
    assert!(err.transient(), "{text}");
    assert!(
        text.contains("options.api_key") && text.contains("admin_url"),
        "{text}"
    );
    assert!(!text.contains("wrong-key"), "{text}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let closed = cfg(&format!("http://127.0.0.1:{port}"), &[("api_key", "k")]);
    for err in [
        Qdrant
            .provision(&slice(), &closed)
            .await
            .expect_err("closed"),
        Qdrant
            .teardown(&slice(), &closed)
            .await
            .expect_err("closed"),
    ] {
        assert!(matches!(err, AdapterError::Unreachable { .. }), "{err}");
    }
}

#[tokio::test]
async fn a_server_error_is_permanent_with_the_servers_words_scripted_server() {
    let fake = FakeServer::start(|req: &Recorded| match req.method.as_str() {
        "GET" if req.path == "/collections" => (
            200,
            r#"{"result":{"collections":[{"name":"bk_acme_login_fix_vec"}]}}"#.into(),
        ),
        _ => (
            500,
            r#"{"status":{"error":"Service internal error: disk full"}}"#.into(),
        ),
    })
    .await;
    let c = cfg(&fake.url, &[]);
    let err = Qdrant.teardown(&slice(), &c).await.expect_err("500");
    assert!(matches!(err, AdapterError::Server { .. }), "{err}");
    assert!(err.to_string().contains("disk full"), "{err}");
}
