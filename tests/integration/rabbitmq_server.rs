//! RabbitMQ: one private broker node per test binary (the [`RabbitNode`] fixture, shared
//! with `slices_rabbitmq`), and the `rabbitmq` adapter's isolation between worlds proven
//! against it through the management API and a raw AMQP 0-9-1 handshake.
//!
//! A node takes ~10 s to boot, so the tests share one, each using slice names of its own.
//! It runs under a small guardian shell that holds the node's process group (epmd
//! included, on a private port) and kills it when its stdin closes, that is when the test
//! process exits for any reason, even SIGKILL: nothing is left running. Without
//! rabbitmq-server the tests fail (never skip): `./scripts/test` installs it.

#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use binky::adapters::http::{Endpoint, Http};
use binky::adapters::rabbitmq::RabbitMq;
use binky::adapters::{Adapter, AdapterConfig, AdapterError, Address, Registry, Slice};
use hyper::Method;

use binky_testkit::net::free_port;

/// A private RabbitMQ node with the management plugin, on 127.0.0.1 (the kit's, under its
/// guardian), with the adapter's view of it.
pub struct RabbitNode(binky_testkit::servers::rabbitmq::RabbitNode);

impl std::ops::Deref for RabbitNode {
    type Target = binky_testkit::servers::rabbitmq::RabbitNode;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

static SHARED: OnceLock<RabbitNode> = OnceLock::new();

impl RabbitNode {
    /// The node shared by this test binary, started on first use.
    pub fn shared() -> &'static RabbitNode {
        SHARED.get_or_init(RabbitNode::start)
    }

    /// Start a node; panics (failing the test) when rabbitmq-server is missing.
    pub fn start() -> RabbitNode {
        RabbitNode(
            binky_testkit::servers::rabbitmq::RabbitNode::start().unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// The adapter configuration for this node (its AMQP port as `options.amqp_port`).
    pub fn cfg(&self) -> AdapterConfig {
        let mut cfg = AdapterConfig {
            admin_url: Some(self.admin_url.clone()),
            ..AdapterConfig::default()
        };
        cfg.options
            .insert("amqp_port".into(), self.amqp_port.to_string());
        cfg
    }

    /// One management API call as `user`: (status, body).
    pub fn api(
        &self,
        user: &str,
        password: &str,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, String) {
        let ep = Endpoint::parse(&format!("http://127.0.0.1:{}", self.mgmt_port), 80)
            .expect("endpoint")
            .with_credentials(user, password);
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        let resp = block(Http::new().call(&ep, method, path, body, &[]))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        (resp.status, resp.text(4000))
    }

    /// The names in an admin listing (`/api/vhosts`, `/api/users`).
    pub fn names(&self, path: &str) -> Vec<String> {
        let (status, body) = self.api("admin", &self.password, Method::GET, path, None);
        assert_eq!(status, 200, "{path}: {body}");
        let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        doc.as_array()
            .expect("a list")
            .iter()
            .filter_map(|v| v["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// Does the node have vhost `name`?
    pub fn has_vhost(&self, name: &str) -> bool {
        self.names("/api/vhosts").iter().any(|v| v == name)
    }

    /// Does the node have user `name`?
    pub fn has_user(&self, name: &str) -> bool {
        self.names("/api/users").iter().any(|u| u == name)
    }
}

/// Run `f` to completion on a fresh runtime.
pub fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// A slice with a fresh secret.
pub fn slice(name: &str) -> Slice {
    Slice {
        name: name.to_owned(),
        secret: binky_controllers::adapter::random_secret().unwrap(),
    }
}

/// Provision `slice` on `node` and return its address.
pub fn provisioned(node: &RabbitNode, slice: &Slice) -> Address {
    block(async {
        RabbitMq
            .provision(slice, &node.cfg())
            .await
            .expect("provision");
        RabbitMq.resolve(slice, &node.cfg()).await.expect("resolve")
    })
}

/// An AMQP 0-9-1 handshake up to `Connection.Open` of `vhost` as `user`: `Ok` when the
/// broker opened the vhost, else what it said (`530 NOT_ALLOWED - …`, `403 ACCESS_REFUSED
/// - …`).
pub fn amqp_open(port: u16, user: &str, password: &str, vhost: &str) -> Result<(), String> {
    fn shortstr(out: &mut Vec<u8>, s: &str) {
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
    fn send(s: &mut TcpStream, class: u16, method: u16, args: &[u8]) -> Result<(), String> {
        let mut payload = class.to_be_bytes().to_vec();
        payload.extend(method.to_be_bytes());
        payload.extend_from_slice(args);
        let mut frame = vec![1u8, 0, 0];
        frame.extend((payload.len() as u32).to_be_bytes());
        frame.extend(payload);
        frame.push(0xCE);
        s.write_all(&frame).map_err(|e| format!("send: {e}"))
    }
    /// The next method frame: (class, method, arguments).
    fn recv(s: &mut TcpStream) -> Result<(u16, u16, Vec<u8>), String> {
        loop {
            let mut head = [0u8; 7];
            s.read_exact(&mut head)
                .map_err(|e| format!("the broker closed the connection ({e})"))?;
            let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
            let mut payload = vec![0u8; size + 1];
            s.read_exact(&mut payload)
                .map_err(|e| format!("short frame: {e}"))?;
            if head[0] == 1 && size >= 4 {
                let class = u16::from_be_bytes([payload[0], payload[1]]);
                let method = u16::from_be_bytes([payload[2], payload[3]]);
                return Ok((class, method, payload[4..size].to_vec()));
            }
        }
    }
    /// Connection.Close's reply code and text.
    fn reason(args: &[u8]) -> String {
        let code = u16::from_be_bytes([args[0], args[1]]);
        let len = args[2] as usize;
        format!(
            "{code} {}",
            String::from_utf8_lossy(&args[3..3 + len.min(args.len() - 3)])
        )
    }

    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"AMQP\x00\x00\x09\x01")
        .map_err(|e| e.to_string())?;
    match recv(&mut s)? {
        (10, 10, _) => {}
        (c, m, _) => return Err(format!("expected Connection.Start, got {c}.{m}")),
    }
    // Connection.StartOk: capabilities asking for a Close (not a bare hang-up) on a
    // failed login, PLAIN credentials, locale.
    let mut caps = Vec::new();
    shortstr(&mut caps, "authentication_failure_close");
    caps.extend([b't', 1]);
    let mut props = Vec::new();
    shortstr(&mut props, "capabilities");
    props.push(b'F');
    props.extend((caps.len() as u32).to_be_bytes());
    props.extend(caps);
    let mut args = (props.len() as u32).to_be_bytes().to_vec();
    args.extend(props);
    shortstr(&mut args, "PLAIN");
    let response = format!("\0{user}\0{password}");
    args.extend((response.len() as u32).to_be_bytes());
    args.extend(response.as_bytes());
    shortstr(&mut args, "en_US");
    send(&mut s, 10, 11, &args)?;
    let tune = match recv(&mut s)? {
        (10, 30, tune) => tune,
        (10, 50, close) => return Err(reason(&close)),
        (c, m, _) => return Err(format!("expected Connection.Tune, got {c}.{m}")),
    };
    // Connection.TuneOk with the broker's own limits, then Connection.Open.
    send(&mut s, 10, 31, &tune[..8])?;
    let mut open = Vec::new();
    shortstr(&mut open, vhost);
    shortstr(&mut open, "");
    open.push(0);
    send(&mut s, 10, 40, &open)?;
    match recv(&mut s)? {
        (10, 41, _) => {
            // A polite Connection.Close (200), so the broker logs no abrupt close.
            let mut close = 200u16.to_be_bytes().to_vec();
            shortstr(&mut close, "bye");
            close.extend([0, 0, 0, 0]);
            let _ = send(&mut s, 10, 50, &close);
            Ok(())
        }
        (10, 50, close) => Err(reason(&close)),
        (c, m, _) => Err(format!("expected Connection.OpenOk, got {c}.{m}")),
    }
}

/// Forward every connection to 127.0.0.1:`port` on to 127.0.0.1:`target` (a broker that
/// "comes back" on an address a world was given while it was down). Runs for the rest of
/// the test process.
pub fn forward(port: u16, target: u16) {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind the forwarder");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone(), upstream.try_clone()),
                (upstream.try_clone(), client.try_clone()),
            ]
            .into_iter()
            .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
            {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
}

/// The (user, password, vhost) of an `amqp://user:pw@host:port/vhost` address.
pub fn amqp_parts(url: &str) -> (String, String, String) {
    let rest = url.strip_prefix("amqp://").expect("an amqp:// URL");
    let (userinfo, hostpath) = rest.rsplit_once('@').expect("credentials");
    let (user, password) = userinfo.split_once(':').expect("user:password");
    let vhost = hostpath.split_once('/').expect("a vhost").1;
    let decode = binky_controllers::url::percent_decode;
    (decode(user), decode(password), decode(vhost))
}

#[test]
fn two_worlds_each_open_only_their_own_vhost() {
    let node = RabbitNode::shared();
    let (a, b) = (slice("bk_mq_iso_a_mq"), slice("bk_mq_iso_b_mq"));
    let (addr_a, addr_b) = (provisioned(node, &a), provisioned(node, &b));
    assert_eq!(
        addr_a.url,
        format!(
            "amqp://bk_mq_iso_a_mq:{}@127.0.0.1:{}/bk_mq_iso_a_mq",
            a.secret, node.amqp_port
        )
    );
    assert_eq!(addr_a.tokens["vhost"], "bk_mq_iso_a_mq");
    assert_eq!(addr_a.tokens["user"], "bk_mq_iso_a_mq");
    assert_eq!(
        addr_a.tokens["management_url"],
        format!("http://127.0.0.1:{}", node.mgmt_port)
    );
    assert!(!addr_a.url.contains(&node.password));
    assert!(!addr_a.tokens.values().any(|v| v.contains(&node.password)));

    // The management API: A may look at its own vhost, and at nothing of B's.
    let (ua, pa) = (a.name.as_str(), a.secret.as_str());
    let (status, body) = node.api(ua, pa, Method::GET, "/api/queues/bk_mq_iso_a_mq", None);
    assert_eq!((status, body.as_str()), (200, "[]"));
    let declare = Some(serde_json::json!({ "durable": true }));
    let (status, body) = node.api(
        ua,
        pa,
        Method::PUT,
        "/api/queues/bk_mq_iso_a_mq/orders",
        declare.clone(),
    );
    assert_eq!(status, 201, "A declares a queue in its vhost: {body}");
    for (method, path, body) in [
        (Method::GET, "/api/queues/bk_mq_iso_b_mq", None),
        (Method::PUT, "/api/queues/bk_mq_iso_b_mq/orders", declare),
        (Method::DELETE, "/api/vhosts/bk_mq_iso_b_mq", None),
        (Method::GET, "/api/users", None),
    ] {
        let (status, text) = node.api(ua, pa, method.clone(), path, body);
        assert!(
            status == 401 || status == 403,
            "A: {method} {path} answered {status}: {text}"
        );
    }
    // B sees no queue of A's, neither in its vhost nor in the list of all it may see.
    let (ub, pb) = (b.name.as_str(), b.secret.as_str());
    for path in ["/api/queues/bk_mq_iso_b_mq", "/api/queues"] {
        let (status, body) = node.api(ub, pb, Method::GET, path, None);
        assert_eq!((status, body.as_str()), (200, "[]"), "B: GET {path}");
    }
    let (status, _) = node.api(
        ub,
        pb,
        Method::GET,
        "/api/queues/bk_mq_iso_a_mq/orders",
        None,
    );
    assert!(status == 401 || status == 403, "B read A's queue: {status}");

    // AMQP itself: the broker opens a world's vhost to its own user only.
    let (user, password, vhost) = amqp_parts(&addr_a.url);
    amqp_open(node.amqp_port, &user, &password, &vhost).expect("A opens its vhost");
    let err = amqp_open(node.amqp_port, &user, &password, "bk_mq_iso_b_mq")
        .expect_err("A opened B's vhost");
    assert!(
        err.starts_with("530") && err.contains("NOT_ALLOWED"),
        "{err}"
    );
    let err = amqp_open(node.amqp_port, &user, "wrong", &vhost).expect_err("a wrong password");
    assert!(
        err.starts_with("403") && err.contains("ACCESS_REFUSED"),
        "{err}"
    );
    let (user_b, password_b, vhost_b) = amqp_parts(&addr_b.url);
    amqp_open(node.amqp_port, &user_b, &password_b, &vhost_b).expect("B opens its vhost");

    // Someone gives A's user B's vhost by hand; provisioning A again takes it away.
    let (status, body) = node.api(
        "admin",
        &node.password,
        Method::PUT,
        "/api/permissions/bk_mq_iso_b_mq/bk_mq_iso_a_mq",
        Some(serde_json::json!({ "configure": ".*", "write": ".*", "read": ".*" })),
    );
    assert!(status == 201 || status == 204, "{status} {body}");
    amqp_open(node.amqp_port, &user, &password, "bk_mq_iso_b_mq").expect("drifted");
    provisioned(node, &a);
    let err = amqp_open(node.amqp_port, &user, &password, "bk_mq_iso_b_mq")
        .expect_err("the drift was not healed");
    assert!(err.contains("NOT_ALLOWED"), "{err}");
    amqp_open(node.amqp_port, &user, &password, &vhost).expect("A still opens its vhost");

    for s in [&a, &b] {
        block(RabbitMq.teardown(s, &node.cfg())).expect("teardown");
    }
}

#[test]
fn teardown_leaves_no_vhost_and_no_user_and_can_run_twice() {
    let node = RabbitNode::shared();
    let (a, b) = (slice("bk_mq_td_a_mq"), slice("bk_mq_td_b_mq"));
    let started = Instant::now();
    let addr_a = provisioned(node, &a);
    eprintln!("provision + resolve: {:?}", started.elapsed());
    provisioned(node, &b);
    let cfg = node.cfg();
    let (ua, pa) = (a.name.as_str(), a.secret.as_str());
    for vhost in ["bk_mq_td_a_mq", "bk_mq_td_b_mq"] {
        let (user, pw) = if vhost == a.name {
            (ua, pa)
        } else {
            (b.name.as_str(), b.secret.as_str())
        };
        let (status, body) = node.api(
            user,
            pw,
            Method::PUT,
            &format!("/api/queues/{vhost}/jobs"),
            Some(serde_json::json!({ "durable": true })),
        );
        assert_eq!(status, 201, "{body}");
        let (status, body) = node.api(
            user,
            pw,
            Method::POST,
            &format!("/api/exchanges/{vhost}/amq.default/publish"),
            Some(serde_json::json!({
                "properties": {}, "routing_key": "jobs", "payload": "work",
                "payload_encoding": "string"
            })),
        );
        assert_eq!(status, 200, "{body}");
    }
    let listed = block(RabbitMq.list(&cfg)).expect("list");
    assert!(
        listed.contains(&a.name) && listed.contains(&b.name),
        "{listed:?}"
    );
    assert_eq!(
        block(RabbitMq.exists(&a, &cfg)).expect("exists"),
        Some(true)
    );

    let started = Instant::now();
    block(RabbitMq.teardown(&a, &cfg)).expect("teardown");
    eprintln!("teardown: {:?}", started.elapsed());

    assert!(!node.has_vhost(&a.name), "A's vhost outlived it");
    assert!(!node.has_user(&a.name), "A's user outlived it");
    assert_eq!(
        block(RabbitMq.exists(&a, &cfg)).expect("exists"),
        Some(false)
    );
    let (user, password, vhost) = amqp_parts(&addr_a.url);
    let err = amqp_open(node.amqp_port, &user, &password, &vhost).expect_err("A's URL still works");
    assert!(err.contains("ACCESS_REFUSED"), "{err}");
    let (status, _) = node.api(ua, pa, Method::GET, "/api/queues", None);
    assert_eq!(status, 401, "A's user still logs in to the management API");
    // B is untouched: its vhost, user, queue and message.
    assert!(node.has_vhost(&b.name) && node.has_user(&b.name));
    let (status, body) = node.api(
        &b.name,
        &b.secret,
        Method::POST,
        "/api/queues/bk_mq_td_b_mq/jobs/get",
        Some(serde_json::json!({
            "count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"
        })),
    );
    assert_eq!(status, 200, "{body}");
    let got: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let payloads: Vec<&str> = got
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["payload"].as_str())
        .collect();
    assert_eq!(payloads, ["work"], "B's message");
    let listed = block(RabbitMq.list(&cfg)).expect("list");
    assert!(
        !listed.contains(&a.name) && listed.contains(&b.name),
        "{listed:?}"
    );
    // Tearing down what is gone succeeds; so does finishing a half-done teardown.
    block(RabbitMq.teardown(&a, &cfg)).expect("second teardown");
    let (status, _) = node.api(
        "admin",
        &node.password,
        Method::DELETE,
        "/api/vhosts/bk_mq_td_b_mq",
        None,
    );
    assert_eq!(status, 204);
    assert!(
        block(RabbitMq.list(&cfg)).expect("list").contains(&b.name),
        "a left-over user is listed"
    );
    block(RabbitMq.teardown(&b, &cfg)).expect("teardown of a half-gone slice");
    assert!(!node.has_user(&b.name) && !node.has_vhost(&b.name));
}

#[test]
fn an_unreachable_broker_or_refused_admin_is_transient_and_never_shows_a_password() {
    let node = RabbitNode::shared();
    let a = slice("bk_mq_down_a_mq");
    let closed = free_port();
    let cases = [
        (
            format!("http://admin:{}@127.0.0.1:{closed}", node.password),
            node.password.clone(),
        ),
        (
            format!("http://admin:wrong-pw-123@127.0.0.1:{}", node.mgmt_port),
            "wrong-pw-123".to_owned(),
        ),
    ];
    for (url, password) in cases {
        let cfg = AdapterConfig {
            admin_url: Some(url.clone()),
            ..AdapterConfig::default()
        };
        let errors = block(async {
            [
                RabbitMq.provision(&a, &cfg).await.err(),
                RabbitMq.teardown(&a, &cfg).await.err(),
                RabbitMq.list(&cfg).await.err(),
                RabbitMq.exists(&a, &cfg).await.err(),
            ]
        });
        for err in errors {
            let err = err.unwrap_or_else(|| panic!("{} succeeded", binky::adapters::redact(&url)));
            let text = err.to_string();
            assert!(
                matches!(err, AdapterError::Unreachable { .. }) && err.transient(),
                "{text}"
            );
            assert!(
                !text.contains(&password) && !text.contains(&a.secret),
                "{text}"
            );
            assert!(text.contains("127.0.0.1"), "{text}");
        }
    }
    // An AMQP address instead of the management API: the message names the fix.
    let cfg = AdapterConfig {
        admin_url: Some(format!("amqp://admin:{}@127.0.0.1:5672", node.password)),
        ..AdapterConfig::default()
    };
    let err = block(RabbitMq.provision(&a, &cfg)).expect_err("amqp:// admin_url");
    assert!(matches!(err, AdapterError::Config(_)), "{err}");
    assert!(err.to_string().contains("15672") && !err.to_string().contains(&node.password));
    if std::env::var_os("BINKY_RABBITMQ_URL").is_none() {
        let err = block(RabbitMq.provision(&a, &AdapterConfig::default())).expect_err("none");
        assert!(err.to_string().contains("admin_url"), "{err}");
    }
    assert!(!node.has_vhost(&a.name) && !node.has_user(&a.name));
    let registry = Registry::default();
    let adapter = registry.get("rabbitmq").expect("rabbitmq");
    assert!(
        !block(adapter.capabilities(&node.cfg()))
            .expect("caps")
            .clone
    );
}
