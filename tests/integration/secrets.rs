//! `${secret:REF}`: resolved at spawn, never stored; every use audited without the value.

use std::time::Duration;

use crate::harness::*;

const VALUE: &str = "s3cr3t-canary-7f3a9c";

fn config() -> String {
    format!(
        r#"
[project]
name = "sec"
{{range}}

[services.api]
cmd = "{SERVE}"
url = true
env = {{ TOKEN = "${{secret:api_token}}", PLAIN = "visible" }}
"#
    )
}

fn everything_binky_wrote(env: &Env) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![env.home.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.push((p.display().to_string(), bytes));
            }
        }
    }
    out
}

#[test]
fn a_secret_reaches_only_the_process_and_the_audit_names_the_reference_not_the_value() {
    let env = Env::new(&config());
    let out = env.binky_env(&["up", "w"], &[("BINKY_SECRET_API_TOKEN", VALUE)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let served = served_env(env.port_of("w", "api"));
    assert_eq!(served["TOKEN"], VALUE);
    assert_eq!(served["PLAIN"], "visible");
    assert!(
        served.get("BINKY_SECRET_API_TOKEN").is_none(),
        "every process got the daemon's secret variables"
    );
    // binky env / events / status show the reference, not the value.
    for args in [
        vec!["env", "w"],
        vec!["events", "w", "-n", "200"],
        vec!["status", "w", "--json"],
    ] {
        let text = env.ok(&args);
        assert!(!text.contains(VALUE), "{args:?} shows the secret: {text}");
    }
    // Nothing binky wrote holds the value: the store, its WAL, the audit, the logs binky
    // writes headers into (the service itself printed nothing).
    for (path, bytes) in everything_binky_wrote(&env) {
        let hay = String::from_utf8_lossy(&bytes);
        assert!(!hay.contains(VALUE), "{path} holds the secret");
    }
    // `binky exec` gets it the same way (here from its own environment).
    let out = env.binky_env(
        &["exec", "w", "-s", "api", "--", "sh", "-c", "echo $TOKEN"],
        &[("BINKY_SECRET_API_TOKEN", VALUE)],
    );
    assert_eq!(stdout(&out), format!("{VALUE}\n"), "{}", stderr(&out));
    let out = env.binky(&["exec", "w", "-s", "api", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("BINKY_SECRET_API_TOKEN"),
        "{}",
        stderr(&out)
    );
    let audit = std::fs::read_to_string(env.home.join("secrets-audit.log")).unwrap();
    assert!(
        audit.contains("sec/w api api_token from daemon environment"),
        "{audit}"
    );
    // From a command instead (a setting of the machine).
    env.ok(&["settings", "secret_command=printf 'cmd-%s' {ref}"]);
    env.ok(&["reload", "w"]);
    let port = env.port_of("w", "api");
    wait_until(
        "the secret comes from the command",
        Duration::from_secs(15),
        || try_served_env(port).is_some_and(|e| e["TOKEN"] == "cmd-api_token"),
    );
    let out = env.binky(&["settings", "secret_command=op read"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("{ref}"), "{}", stderr(&out));
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_secret_that_cannot_be_found_fails_the_service_with_what_to_set() {
    let env = Env::new(&config());
    let out = env.binky_env(&["up", "w", "--timeout", "20s"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("BINKY_SECRET_API_TOKEN") && err.contains("secret_command"),
        "{err}"
    );
    // A secret command that fails (a locked vault): its stderr, never its stdout, is shown;
    // a fixed command and `binky up` recover.
    env.ok(&[
        "settings",
        "secret_command=echo half-{ref}-value; echo 'vault is locked' >&2; exit 3",
    ]);
    let out = env.binky_env(&["up", "w", "--timeout", "20s"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("secret_command failed") && err.contains("vault is locked"),
        "{err}"
    );
    assert!(
        !err.contains("half-"),
        "the failing command's output leaked: {err}"
    );
    env.ok(&["settings", "secret_command=printf fixed-%s {ref}"]);
    env.ok(&["up", "w"]);
    assert_eq!(
        served_env(env.port_of("w", "api"))["TOKEN"],
        "fixed-api_token"
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_secret_command_that_hangs_fails_up_and_one_that_prints_a_lot_is_read_whole() {
    let env = Env::new(&config());
    // A vault that waits for a password nobody types: stopped after the limit (500 ms here,
    // 10 s by default), counted as a failed start each time, so `up` fails with the reason
    // instead of waiting for its timeout.
    env.ok(&["settings", "secret_command=sleep 60; echo late-{ref}"]);
    let out = env.binky_env(
        &["up", "w", "--timeout", "60s"],
        &[("BINKY_SECRET_TIMEOUT_MS", "500")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("secret_command did not answer within 500ms"),
        "{err}"
    );
    assert!(!err.contains("late-"), "{err}");
    // 200 KB on stdout: more than a pipe holds; read whole, not stalled into the timeout.
    env.ok(&[
        "settings",
        "secret_command=head -c 100000 /dev/zero | tr '\\0' a; printf '%s' {ref}",
    ]);
    env.ok(&["up", "w", "--timeout", "30s"]);
    let token = served_env(env.port_of("w", "api"))["TOKEN"]
        .as_str()
        .expect("TOKEN is a string")
        .to_owned();
    assert_eq!(token.len(), 100_000 + "api_token".len());
    assert!(
        token.ends_with("aaaapi_token"),
        "{}",
        &token[token.len() - 20..]
    );
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn a_canary_service_printing_its_credentials_leaves_none_in_logs_and_plain_lines_intact() {
    let pg = crate::pg_server::PgServer::start();
    let key = format!("AKIA{}", "IOSFODNN7EXAMPLE");
    let env = Env::new(
        r#"
[project]
name = "canary"
{range}

[services.db]
adapter = "postgres"
admin_url = "${env.PG_ADMIN}"

[services.bird]
cmd = "sh canary.sh; exec sleep 600"
depends_on = ["db"]
env = { TOKEN = "${secret:canary}", DATABASE_URL = "${db.url}" }
"#,
    );
    std::fs::write(
        env.repo.join("canary.sh"),
        format!("echo \"token: $TOKEN\"\necho \"db: $DATABASE_URL\"\necho \"cloud: {key}\"\nprintf 'plain \\377 bytes, tab\\tand café 日本\\n'\nprintf 'no newline at the end'\n"),
    )
    .unwrap();
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "canary"]);
    let out = env.binky_env(
        &["up", "w"],
        &[
            ("BINKY_SECRET_CANARY", VALUE),
            ("PG_ADMIN", pg.admin_url.as_str()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let url = env.env_of("w")["DB_URL"].as_str().unwrap().to_owned();
    let password = url
        .split_once("://")
        .unwrap()
        .1
        .split_once('@')
        .unwrap()
        .0
        .split_once(':')
        .unwrap()
        .1
        .to_owned();
    assert!(password.len() >= 8);
    let logs_have = |what: &str| {
        let text = env.ok(&["logs", "w", "bird", "-n", "100"]);
        text.contains(what)
    };
    // The unfinished last line is written after a pause, up to what could begin a secret
    // (its last characters wait when a random password happens to start with them).
    wait_until("the canary sang", Duration::from_secs(15), || {
        logs_have("no newline at the ")
    });
    let text = env.ok(&["logs", "w", "bird", "-n", "100"]);
    assert!(text.contains("token: [secret]"), "{text}");
    assert!(text.contains("cloud: [secret]"), "{text}");
    assert!(text.contains(":[secret]@127.0.0.1"), "{text}");
    let events = env.ok(&["events", "w", "-n", "200"]);
    // What an agent reads over MCP.
    let mcp = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let client = crate::mcp::connect(&env).await;
        let mut all = String::new();
        for (tool, args) in [
            (
                "logs",
                serde_json::json!({"world": "w", "service": "bird", "lines": 100}),
            ),
            ("events", serde_json::json!({"world": "w"})),
            ("status", serde_json::json!({"world": "w"})),
        ] {
            let (_, v) = crate::mcp::call(&client, tool, args).await;
            all.push_str(&v.to_string());
        }
        let _ = client.cancel().await;
        all
    });
    assert!(mcp.contains("token: [secret]"), "{mcp}");
    for secret in [VALUE, password.as_str(), key.as_str()] {
        assert!(!mcp.contains(secret), "MCP output shows {secret}");
        assert!(!text.contains(secret), "binky logs shows {secret}");
        assert!(!events.contains(secret), "events show {secret}");
        for (path, bytes) in everything_binky_wrote(&env) {
            // The slice's password is kept in the store (0600) by design: binky hands it out.
            if secret == password && path.contains("state.db") {
                continue;
            }
            assert!(
                !String::from_utf8_lossy(&bytes).contains(secret),
                "{path} holds {secret}"
            );
        }
    }
    // Ordinary output comes through byte for byte (invalid UTF-8 included), and the last
    // line without a newline too.
    let log = everything_binky_wrote(&env)
        .into_iter()
        .find(|(_, b)| b.windows(6).any(|w| w == b"plain "))
        .map(|(_, b)| b)
        .expect("the service's log file");
    let line: &[u8] = b"plain \xff bytes, tab\tand caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\n";
    assert!(
        log.windows(line.len()).any(|w| w == line),
        "a plain line was changed: {}",
        String::from_utf8_lossy(&log)
    );
    // The unfinished line is there up to what could begin a secret (a random password may
    // start with "d", "nd" or "end": those characters wait for the line's end).
    let tail = b"no newline at the ";
    let at = log
        .windows(tail.len())
        .rposition(|w| w == tail)
        .expect("the unfinished line");
    let rest = &log[at + tail.len()..];
    assert!(
        b"end".starts_with(rest),
        "after the unfinished line: {:?}",
        String::from_utf8_lossy(rest)
    );
    env.ok(&["remove", "w"]);
    pg.assert_no_slices();
    env.assert_nothing_left(&["w"]);
}

/// The `--- binky <time> · <cmd> ---` line that starts each run in a service's log shows its
/// command scrubbed as its output is: a value a `${secret:…}` resolved to, a variable named
/// like a secret and a password inside a URL never reach the file through it.
#[test]
fn the_log_header_shows_the_command_with_its_secrets_scrubbed() {
    let env = Env::new(
        r#"
[project]
name = "hdr"
{range}

[services.api]
cmd = "exec python3 server.py ${self.port} ${env.OPAQUE} ${env.API_KEY} ${env.UPSTREAM}"
env = { TOKEN = "${secret:canary}" }
"#,
    );
    let (key, password) = ("key-canary-4d2f8a", "pw-canary-9e1b7c");
    let upstream = format!("http://user:{password}@127.0.0.1:9/");
    let out = env.binky_env(
        &["up", "w"],
        &[
            ("BINKY_SECRET_CANARY", VALUE),
            // Named like nothing secret: only the resolved `${secret:canary}` knows it.
            ("OPAQUE", VALUE),
            ("API_KEY", key),
            ("UPSTREAM", upstream.as_str()),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::read_to_string(env.home.join("logs/hdr/w/api.log")).unwrap();
    let header = log
        .lines()
        .find(|l| l.starts_with("--- binky "))
        .unwrap_or_else(|| panic!("no header line in {log}"));
    assert!(
        header.contains("exec python3 server.py") && header.contains("[secret]"),
        "{header}"
    );
    for secret in [VALUE, key, password] {
        assert!(!log.contains(secret), "the log shows {secret}: {header}");
    }
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
