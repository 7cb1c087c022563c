//! The web dashboard, in a real headless Chromium against the real daemon: it lists the
//! worlds, a service's new log line reaches the page within a second, its buttons change
//! the world (through the same desired state as the commands), and an action without a
//! session, from another origin or for another port is refused; a session is a random id
//! per sign-in that sign-out, the next sign-in and a daemon restart end. Screenshots are kept in
//! `target/tmp/dashboard/` (`BINKY_DOCS_SCREENSHOT=path` writes the README's too).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use binky_testkit::browser::Browser;

use crate::harness::*;

/// A service that prints what the test writes into `say` in its world's worktree (taking the
/// file first, so a `say` written meanwhile waits for the next turn), with the time it
/// printed it (ms since the epoch), and a secret of its environment with it.
fn config() -> String {
    let say = "say";
    format!(
        r#"
[project]
name = "acme"
{{range}}

[services.api]
cmd = "while true; do if mv {say} .said 2>/dev/null; then echo \"said $(cat .said) at $(date +%s%3N) token $API_TOKEN\"; rm -f .said; fi; sleep 0.02; done"
env = {{ API_TOKEN = "${{env.API_TOKEN}}" }}

[services.web]
cmd = "{SERVE}"
url = "web"
"#
    )
}

/// `binky up NAME` with the service's secret in the environment.
fn up(env: &Env, name: &str) {
    let out = env.binky_env(&["up", name], &[("API_TOKEN", "tok-5f3a9c1e-very-secret")]);
    assert!(out.status.success(), "binky up {name}: {}", stderr(&out));
}

fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard")
}

/// The sign-in link `binky dashboard --no-open` prints.
fn sign_in_link(env: &Env) -> String {
    let out = env.ok(&["dashboard", "--no-open"]);
    let link = out.lines().next().unwrap_or_default().trim().to_owned();
    assert!(
        link.starts_with(&format!(
            "http://binky.localhost:{}/login?token=",
            env.proxy_port()
        )),
        "binky dashboard printed {out}"
    );
    link
}

/// A signed-in browser on the dashboard, showing the worlds.
fn signed_in(env: &Env, worlds: usize) -> Browser {
    let mut b = Browser::start(1400, 1000);
    b.navigate(&sign_in_link(env));
    b.wait_for(
        &format!("{worlds} worlds listed"),
        Duration::from_secs(60),
        &format!("document.querySelectorAll('tr.world').length === {worlds}"),
    );
    b
}

fn open_world(b: &mut Browser, name: &str) {
    b.eval(&format!(
        "document.querySelector('tr.world[data-world=\"{name}\"]').click()"
    ));
    b.wait_for(
        &format!("{name}'s log live"),
        Duration::from_secs(60),
        "document.getElementById('log-state').textContent === 'live'",
    );
}

fn world_state(b: &mut Browser, name: &str) -> String {
    b.eval(&format!(
        "(document.querySelector('tr.world[data-world=\"{name}\"]') || {{dataset: {{}}}}).dataset.state || ''"
    ))
    .as_str()
    .unwrap_or_default()
    .to_owned()
}

fn status_of(env: &Env, name: &str) -> String {
    env.status()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .map(|w| w["state"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[test]
fn the_dashboard_lists_the_worlds_and_shows_a_new_log_line_as_it_is_printed() {
    let env = Env::new("");
    env.write_config(&config());
    env.git(&["commit", "-qam", "dashboard"]);
    up(&env, "one");
    up(&env, "two");
    let mut b = signed_in(&env, 2);
    let listed = b.eval("[...document.querySelectorAll('tr.world')].map(r => r.dataset.world + ':' + r.dataset.state).join(' ')");
    assert_eq!(listed, "one:ready two:ready");
    open_world(&mut b, "one");
    std::fs::create_dir_all(artifacts()).unwrap();

    // The service prints the line once the file is there; the page shows it as it is printed,
    // on a machine as loaded as a CI run's: a hog of the test's own keeps every core busy.
    // (How fast is measured by `cargo bench --bench dashboard`, 76 ms at the median: a test
    // under load keeps no deadline of a second.) The file appears whole (written, then
    // renamed): a service that looked between its creation and its write would print an
    // empty line and delete the file, and the test would wait for a line never printed.
    let hog = binky_testkit::load::CpuHog::start(2);
    let marker = format!("hello-{}", std::process::id());
    let say = |text: &str| {
        let dir = env.worktree("one");
        std::fs::write(dir.join("say.new"), text).unwrap();
        std::fs::rename(dir.join("say.new"), dir.join("say")).unwrap();
    };
    say(&marker);
    let line = b.wait_for(
        "the new log line in the page",
        Duration::from_secs(30),
        &format!(
            "(() => {{ const d = [...document.querySelectorAll('#log .line')].find(l => l.textContent.includes('{marker}')); return d ? d.textContent + ' | ' + d.dataset.at : ''; }})()"
        ),
    );
    let line = line.as_str().unwrap().to_owned();
    // Each of a run of lines printed back to back under the load is shown, once and whole.
    for i in 0..20 {
        let next = format!("{marker}-{i}");
        say(&next);
        b.wait_for(
            &format!("line {i} of the run in the page"),
            Duration::from_secs(30),
            &format!("[...document.querySelectorAll('#log .line')].filter(l => l.textContent.includes('said {next} at')).length === 1"),
        );
    }
    println!("shown beside {} busy threads", hog.threads());
    drop(hog);
    // What the measurement was: the service's clock when it printed, the page's when it
    // showed the line (the same machine's clock).
    let printed: i64 = line
        .split(" at ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no print time in {line}"));
    let shown: i64 = line.rsplit(" | ").next().unwrap().trim().parse().unwrap();
    println!(
        "log line shown {} ms after the service printed it",
        shown - printed
    );
    // Secrets are scrubbed in the page as in the files.
    assert!(line.contains("token [secret]"), "{line}");
    assert!(!line.contains("very-secret"), "{line}");
    let html = b
        .eval("document.body.innerHTML")
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!html.contains("tok-5f3a9c1e"), "a secret in the page");

    // The filter hides what does not match; pause holds new lines back.
    b.eval("document.getElementById('log-filter').value = 'nothing-matches'; document.getElementById('log-filter').dispatchEvent(new Event('input'))");
    let visible =
        b.eval("[...document.querySelectorAll('#log .line')].filter(l => !l.hidden).length");
    assert_eq!(visible, 0);
    b.eval("document.getElementById('log-filter').value = ''; document.getElementById('log-filter').dispatchEvent(new Event('input'))");
    b.screenshot(&artifacts().join("lists-worlds.png"));
    // The README's picture (made once, by hand: `BINKY_DOCS_SCREENSHOT=docs/dashboard.png`).
    if let Some(path) = std::env::var_os("BINKY_DOCS_SCREENSHOT") {
        b.screenshot(&PathBuf::from(path));
    }
    drop(b);
    env.ok(&["remove", "one"]);
    env.ok(&["remove", "two"]);
    env.assert_nothing_left(&["one", "two"]);
}

#[test]
fn the_dashboards_buttons_change_the_world() {
    let env = Env::new("");
    env.write_config(&config());
    env.git(&["commit", "-qam", "dashboard"]);
    up(&env, "one");
    up(&env, "two");
    let mut b = signed_in(&env, 2);
    open_world(&mut b, "one");

    // Down, then up again: the page and `binky status` agree.
    b.eval("document.querySelector('#detail button[data-action=down]').click()");
    b.wait_for(
        "one stopped in the page",
        Duration::from_secs(60),
        "document.querySelector('tr.world[data-world=\"one\"]').dataset.state === 'stopped'",
    );
    assert_eq!(status_of(&env, "one"), "stopped");
    assert_eq!(
        world_state(&mut b, "two"),
        "ready",
        "the other world is untouched"
    );
    b.eval("document.querySelector('#detail button[data-action=up]').click()");
    b.wait_for(
        "one ready again",
        Duration::from_secs(60),
        "document.querySelector('tr.world[data-world=\"one\"]').dataset.state === 'ready'",
    );

    // Apply shows the plan first and changes nothing until asked. The daemon's watcher also
    // applies a saved edit by itself (after 20 ms of quiet): when it got there before the
    // click, the page rightly says "unchanged" and `binky apply --dry-run` agrees; then the
    // next edit is tried, until the click is first.
    let wt = env.worktree("one");
    let toml = std::fs::read_to_string(wt.join("binky.toml")).unwrap();
    let mut plan = None;
    for attempt in 0..10 {
        std::fs::write(
            wt.join("binky.toml"),
            toml.replace(
                "API_TOKEN}\" }",
                &format!("API_TOKEN}}\", MODE = \"two-{attempt}\" }}"),
            ),
        )
        .unwrap();
        b.eval("document.getElementById('d-message').textContent = ''");
        b.eval("document.querySelector('#detail button[data-action=apply]').click()");
        let seen = b.wait_for(
            "the apply plan, or the page saying the watcher applied the edit first",
            Duration::from_secs(60),
            "(!document.getElementById('d-plan').hidden && document.getElementById('d-plan-text').textContent) || (document.getElementById('d-message').textContent.includes('unchanged') && 'unchanged')",
        );
        if seen == "unchanged" {
            let cli = env.ok(&["apply", "one", "--dry-run"]);
            assert!(
                cli.contains("unchanged"),
                "the page said unchanged, the CLI: {cli}"
            );
            continue;
        }
        plan = Some(seen);
        break;
    }
    let plan = plan.expect("the daemon's watcher applied each of 10 edits before the page asked");
    assert!(plan.as_str().unwrap().contains("api"), "plan: {plan}");

    // Remove: a wrong name is refused; a dirty worktree is refused without force.
    std::fs::write(wt.join("scratch.txt"), "uncommitted").unwrap();
    b.eval("document.querySelector('#detail button[data-action=remove]').click()");
    b.eval("document.getElementById('d-remove-name').value = 'two'; document.getElementById('d-remove-go').click()");
    let refused = b.wait_for(
        "the wrong name refused",
        Duration::from_secs(60),
        "document.getElementById('d-message').classList.contains('error') && document.getElementById('d-message').textContent",
    );
    assert!(
        refused.as_str().unwrap().contains("type the world's name"),
        "{refused}"
    );
    b.eval("document.getElementById('d-remove-name').value = 'one'; document.getElementById('d-remove-go').click()");
    let dirty = b.wait_for(
        "the dirty worktree refused",
        Duration::from_secs(60),
        "document.getElementById('d-message').textContent.includes('uncommitted') && document.getElementById('d-message').textContent",
    );
    assert!(dirty.as_str().unwrap().contains("scratch.txt"), "{dirty}");
    assert!(wt.join("scratch.txt").exists());
    b.eval("document.getElementById('d-remove-force').checked = true; document.getElementById('d-remove-go').click()");
    b.wait_for(
        "one gone from the page",
        Duration::from_secs(60),
        "document.querySelectorAll('tr.world').length === 1 && !document.querySelector('tr.world[data-world=\"one\"]')",
    );
    assert!(!wt.exists(), "the worktree of one is removed");
    b.screenshot(&artifacts().join("after-remove.png"));
    drop(b);
    env.ok(&["remove", "two"]);
    env.assert_nothing_left(&["one", "two"]);
}

/// One raw HTTP/1.1 request to the proxy; the whole answer.
fn raw(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn post(port: u16, host: &str, headers: &str, path: &str, body: &str) -> String {
    raw(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn dashboard_actions_without_a_session_from_another_origin_or_for_another_port_are_refused() {
    let env = Env::new("");
    env.write_config(&config());
    env.git(&["commit", "-qam", "dashboard"]);
    up(&env, "one");
    let port = env.proxy_port();
    let host = format!("binky.localhost:{port}");
    let origin = format!("Origin: http://{host}\r\n");
    let id = {
        let link = sign_in_link(&env);
        // The link works once: the second time it is refused.
        let path = link.split_once(&host).unwrap().1;
        let get = |p: &str| {
            raw(
                port,
                &format!("GET {p} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
            )
        };
        let first = get(path);
        assert_eq!(status_code(&first), 200, "{first}");
        let cookie = first
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .unwrap_or_else(|| panic!("no cookie: {first}"))
            .to_owned();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        let again = get(path);
        assert_eq!(
            status_code(&again),
            403,
            "a used link must be refused: {again}"
        );
        let session = cookie.split(';').next().unwrap().to_owned();

        // Reads need a session too.
        let stream = get("/api/events?world=1");
        assert_eq!(status_code(&stream), 401, "{stream}");

        let body = r#"{"world": 1}"#;
        let cookie_h = format!("Cookie: {session}\r\n");
        // No session.
        let r = post(port, &host, &origin, "/api/down", body);
        assert_eq!(status_code(&r), 401, "{r}");
        assert!(
            r.contains("binky dashboard"),
            "the refusal names the fix: {r}"
        );
        // A wrong session.
        let r = post(
            port,
            &host,
            &format!("{origin}Cookie: binky_session=00ff\r\n"),
            "/api/down",
            body,
        );
        assert_eq!(status_code(&r), 401, "{r}");
        // The session, but another page's origin (CSRF), or none.
        let r = post(
            port,
            &host,
            &format!("{cookie_h}Origin: http://evil.localhost:{port}\r\n"),
            "/api/down",
            body,
        );
        assert_eq!(status_code(&r), 403, "{r}");
        assert!(r.contains("evil.localhost"), "{r}");
        let r = post(port, &host, &cookie_h, "/api/down", body);
        assert_eq!(status_code(&r), 403, "{r}");
        // The dashboard's own name and port, but over HTTPS: the page of the other listener
        // (a scheme is part of an origin).
        let r = post(
            port,
            &host,
            &format!("{cookie_h}Origin: https://{host}\r\n"),
            "/api/down",
            body,
        );
        assert_eq!(status_code(&r), 403, "{r}");
        assert!(r.contains(&format!("https://{host}")), "{r}");
        // Another port of the dashboard's name: a request meant for another server.
        for other in [
            "binky.localhost:1".to_owned(),
            "binky.localhost".to_owned(),
            format!("binky.localhost:{}", env.https_port()),
        ] {
            let r = post(
                port,
                &other,
                &format!("{cookie_h}Origin: http://{other}\r\n"),
                "/api/down",
                body,
            );
            assert_eq!(status_code(&r), 421, "{other}: {r}");
            assert!(r.contains(&host), "the refusal names the right host: {r}");
            let r = raw(
                port,
                &format!("GET /api/session HTTP/1.1\r\nHost: {other}\r\n{cookie_h}Connection: close\r\n\r\n"),
            );
            assert_eq!(status_code(&r), 421, "{other}: {r}");
        }
        // Another Host (DNS rebinding) never reaches the dashboard.
        let r = post(
            port,
            &format!("rebound.example:{port}"),
            &format!("{cookie_h}{origin}"),
            "/api/down",
            body,
        );
        assert_ne!(status_code(&r), 200, "{r}");
        assert!(!r.contains("down requested"), "{r}");
        assert_eq!(status_of(&env, "one"), "ready", "nothing was changed");
        // With both, it is done.
        let r = post(
            port,
            &host,
            &format!("{cookie_h}{origin}"),
            "/api/down",
            body,
        );
        assert_eq!(status_code(&r), 200, "{r}");
        wait_until("one stopped", Duration::from_secs(20), || {
            status_of(&env, "one") == "stopped"
        });
        let r = post(port, &host, &format!("{cookie_h}{origin}"), "/api/up", body);
        assert_eq!(status_code(&r), 200, "{r}");
        wait_until("one ready", Duration::from_secs(20), || {
            status_of(&env, "one") == "ready"
        });
        1
    };

    // In a browser: a page of another origin (a world's own URL) that posts to the
    // dashboard, after this browser signed in, changes nothing.
    let mut b = signed_in(&env, 1);
    b.navigate(&format!("http://web.one.acme.localhost:{port}/"));
    let sent = b.eval(&format!(
        "fetch('http://binky.localhost:{port}/api/down', {{method: 'POST', mode: 'no-cors', credentials: 'include', headers: {{'content-type': 'text/plain'}}, body: JSON.stringify({{world: {id}}})}}).then(() => 'sent', e => 'failed: ' + e)"
    ));
    assert_eq!(sent, "sent");
    // The request was answered (fetch resolved): had it been done, the world would be
    // stopping now.
    let wanted = env.status()["worlds"][0]["desired"].clone();
    assert_eq!(wanted, "running", "a foreign page stopped the world");
    assert_eq!(status_of(&env, "one"), "ready");
    drop(b);
    env.ok(&["remove", "one"]);
    env.assert_nothing_left(&["one"]);
}

/// Sign in over plain HTTP with a new link, sending `cookie` (a session the browser already
/// has) if any; the `Set-Cookie` line of the answer.
fn sign_in_raw(env: &Env, cookie: Option<&str>) -> String {
    let port = env.proxy_port();
    let host = format!("binky.localhost:{port}");
    let link = sign_in_link(env);
    let path = link.split_once(&host).unwrap().1;
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    let a = raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{cookie}Connection: close\r\n\r\n"),
    );
    assert_eq!(status_code(&a), 200, "{a}");
    a.lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie: {a}"))
        .to_owned()
}

/// `binky_session=ID` of a `Set-Cookie` value.
fn session_of(set_cookie: &str) -> String {
    let pair = set_cookie.split(';').next().unwrap().trim().to_owned();
    let id = pair
        .strip_prefix("binky_session=")
        .unwrap_or_else(|| panic!("{set_cookie}"));
    assert!(
        id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "a session id is 32 random bytes in hex: {set_cookie}"
    );
    pair
}

/// What `GET /api/session` with `cookie` answers: its status.
fn session_status(port: u16, cookie: &str) -> u16 {
    status_code(&raw(
        port,
        &format!("GET /api/session HTTP/1.1\r\nHost: binky.localhost:{port}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"),
    ))
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if kind.is_file() {
            if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// A sign-in makes a new random session (never a secret of the home's): the browser's old
/// one ends (rotation), another browser's lives on, sign-out ends it and the page streams it
/// opened, and a daemon restart ends every session, as none is kept in a file any process of
/// the user (a world's service included) could read.
#[test]
fn a_session_is_random_per_sign_in_kept_in_no_file_and_ends_at_sign_out_the_next_sign_in_or_a_restart(
) {
    let env =
        Env::new("[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600\"\n");
    env.ok(&["daemon", "start"]);
    let port = env.proxy_port();
    let host = format!("binky.localhost:{port}");

    let first = sign_in_raw(&env, None);
    assert!(
        first.contains("HttpOnly")
            && first.contains("SameSite=Strict")
            && first.contains("Max-Age=86400")
            && !first.contains("Secure"),
        "a day at most, out of scripts' reach; Secure only over HTTPS: {first}"
    );
    let a = session_of(&first);
    assert_eq!(session_status(port, &a), 200);
    // Nothing under the home holds it (nor the old permanent secret's file).
    assert!(!env.home.join("dashboard.key").exists());
    let id = a.split_once('=').unwrap().1;
    assert_eq!(
        files_containing(&env.home, id.as_bytes()),
        Vec::<PathBuf>::new()
    );

    // The same browser signs in again: a new id, and the one it came with ends.
    let b = session_of(&sign_in_raw(&env, Some(&a)));
    assert_ne!(a, b);
    assert_eq!(session_status(port, &a), 401, "the old id was rotated out");
    assert_eq!(session_status(port, &b), 200);
    // Another browser: both live.
    let c = session_of(&sign_in_raw(&env, None));
    assert_ne!(b, c);
    assert_eq!(session_status(port, &b), 200);
    assert_eq!(session_status(port, &c), 200);

    // A page of c follows the worlds; c signs out (an action: its Origin is checked too).
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET /api/stream HTTP/1.1\r\nHost: {host}\r\nCookie: {c}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("event: update") {
        let n = stream.read(&mut buf).expect("the stream's first update");
        assert!(
            n > 0,
            "the stream ended early: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    let r = post(port, &host, &format!("Cookie: {c}\r\n"), "/api/signout", "");
    assert_eq!(status_code(&r), 403, "a sign-out from another page: {r}");
    assert_eq!(session_status(port, &c), 200);
    let r = post(
        port,
        &host,
        &format!("Cookie: {c}\r\nOrigin: http://{host}\r\n"),
        "/api/signout",
        "",
    );
    assert_eq!(status_code(&r), 200, "{r}");
    assert!(
        r.lines()
            .any(|l| l.starts_with("set-cookie: binky_session=;") && l.contains("Max-Age=0")),
        "the browser's cookie is cleared: {r}"
    );
    assert_eq!(session_status(port, &c), 401, "signed out");
    assert_eq!(
        session_status(port, &b),
        200,
        "another browser is still signed in"
    );
    // The page's stream ends with its session (read_to_end returns at its end; the read
    // timeout would fail it).
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .expect("the stream ends at sign-out");

    // A restarted daemon knows no session.
    env.ok(&["daemon", "restart"]);
    assert_eq!(
        session_status(port, &b),
        401,
        "sessions end with the daemon"
    );
}

/// In a browser: Sign out ends the session; the page stops following the worlds and says
/// how to sign in again.
#[test]
fn the_sign_out_button_ends_the_session_and_the_page_says_how_to_sign_in_again() {
    let env = Env::new("");
    env.write_config(&config());
    env.git(&["commit", "-qam", "dashboard"]);
    up(&env, "one");
    let mut b = signed_in(&env, 1);
    b.eval("document.getElementById('signout').click()");
    let why = b.wait_for(
        "the sign-in notice",
        Duration::from_secs(30),
        "!document.getElementById('signin').hidden && document.getElementById('signin').textContent",
    );
    let why = why.as_str().unwrap_or_default().to_owned();
    assert!(
        why.contains("Signed out") && why.contains("binky dashboard"),
        "{why}"
    );
    assert_eq!(b.eval("document.querySelectorAll('tr.world').length"), 0);
    let status = b.eval("fetch('/api/session').then(r => r.status)");
    assert_eq!(
        status, 401,
        "the session ended on the daemon, not only in the page"
    );
    drop(b);
    env.ok(&["remove", "one"]);
    env.assert_nothing_left(&["one"]);
}

#[test]
fn binky_dashboard_says_so_when_the_proxy_serves_on_no_port() {
    let env =
        Env::new("[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600\"\n");
    env.ok(&["port", "--proxy", "0", "--https", "0"]);
    env.ok(&["daemon", "start"]);
    let out = env.binky(&["dashboard", "--no-open"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("serves on no port") && err.contains("binky port"),
        "the failure names the fix: {err}"
    );
}

#[test]
fn a_project_domain_of_localhost_is_refused_as_it_would_shadow_the_dashboard() {
    let env = Env::new(
        "[project]\nname = \"acme\"\ndomain = \"localhost\"\n{range}\n\n[services.api]\ncmd = \"sleep 600\"\nurl = \"api\"\n",
    );
    let out = env.binky(&["check"]);
    assert_ne!(out.status.code(), Some(0));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("project.domain") && text.contains("binky.localhost"),
        "{text}"
    );
}

#[test]
fn a_held_world_is_approved_from_the_dashboard_which_shows_the_exact_command() {
    let env = Env::new(
        "[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600 # approve-me\"\n",
    );
    env.ok(&["settings", "approvals=true"]);
    let out = env.binky(&["up", "w"]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    let mut b = signed_in(&env, 1);
    b.wait_for(
        "w held for approval in the page",
        Duration::from_secs(60),
        "document.querySelector('tr.world[data-world=\"w\"]').dataset.state === 'approval'",
    );
    // The admission queue says why; the approval shows the command exactly as written.
    let queue = b.eval("document.getElementById('admission').textContent");
    assert!(queue.as_str().unwrap().contains("acme/w"), "{queue}");
    let shown = b.wait_for(
        "the pending approval",
        Duration::from_secs(60),
        "(document.querySelector('#approvals .panel pre') || {}).textContent",
    );
    assert_eq!(shown, "sleep 600 # approve-me");
    b.eval("document.querySelector('#approvals .panel button').click()");
    b.wait_for(
        "w ready once approved",
        Duration::from_secs(60),
        "document.querySelector('tr.world[data-world=\"w\"]').dataset.state === 'ready'",
    );
    let list = env.ok(&["approve", "--list", "--json"]);
    assert!(list.contains("\"approved\": true"), "{list}");
    drop(b);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

#[test]
fn the_dashboard_is_served_over_https_with_a_certificate_of_the_local_ca() {
    let env =
        Env::new("[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600\"\n");
    env.ok(&["daemon", "start"]);
    let port = env.https_port();
    let out = Command::new("curl")
        .args([
            "-s",
            "--cacert",
            &env.home.join("ca/ca.crt").display().to_string(),
            "--resolve",
            &format!("binky.localhost:{port}:127.0.0.1"),
            "-w",
            " %{http_code}",
            &format!("https://binky.localhost:{port}/api/session"),
        ])
        .output()
        .expect("curl (scripts/test installs it)");
    let text = stdout(&out);
    // Verified TLS (curl fails otherwise), and the API answers: not signed in.
    assert!(out.status.success(), "curl: {}", stderr(&out));
    assert!(
        text.ends_with(" 401") && text.contains("binky dashboard"),
        "{text}"
    );

    // On the HTTPS listener the dashboard's origin is https://binky.localhost:<https port>:
    // the HTTP listener's name or scheme is refused there as theirs is here.
    let session = session_of(&sign_in_raw(&env, None));
    let https = |method: &str, headers: &[String], path: &str| -> String {
        let mut args = vec![
            "-s".to_owned(),
            "--cacert".to_owned(),
            env.home.join("ca/ca.crt").display().to_string(),
            "--resolve".to_owned(),
            format!("binky.localhost:{port}:127.0.0.1"),
            "-X".to_owned(),
            method.to_owned(),
            "-H".to_owned(),
            format!("Cookie: {session}"),
            "-w".to_owned(),
            " %{http_code}".to_owned(),
        ];
        for h in headers {
            args.extend(["-H".to_owned(), h.clone()]);
        }
        args.push(format!("https://binky.localhost:{port}{path}"));
        let out = Command::new("curl").args(&args).output().expect("curl");
        assert!(out.status.success(), "curl: {}", stderr(&out));
        stdout(&out)
    };
    let http_port = env.proxy_port();
    assert!(
        https("GET", &[], "/api/session").ends_with(" 200"),
        "a session is good on both listeners"
    );
    for host in [
        format!("binky.localhost:{http_port}"),
        "binky.localhost".to_owned(),
        "binky.localhost:1".to_owned(),
    ] {
        let r = https("GET", &[format!("Host: {host}")], "/api/session");
        assert!(r.ends_with(" 421"), "{host}: {r}");
    }
    for origin in [
        format!("http://binky.localhost:{port}"),
        format!("https://binky.localhost:{http_port}"),
        format!("http://binky.localhost:{http_port}"),
    ] {
        let r = https("POST", &[format!("Origin: {origin}")], "/api/signout");
        assert!(r.ends_with(" 403"), "{origin}: {r}");
        assert!(
            r.contains(&format!("https://binky.localhost:{port}")),
            "{r}"
        );
    }
    assert!(https("GET", &[], "/api/session").ends_with(" 200"));
    let own = format!("Origin: https://binky.localhost:{port}");
    let r = https("POST", &[own], "/api/signout");
    assert!(r.ends_with(" 200") && r.contains("signed out"), "{r}");
    assert!(https("GET", &[], "/api/session").ends_with(" 401"));
}

/// With approvals off (the default) nothing waits for a person: the dashboard says approvals
/// are off and offers no Approve button, and `binky approve --list` lists nothing pending.
/// Turned on, the command nobody approved is pending, with its button.
#[test]
fn with_approvals_off_no_command_is_pending_and_no_approve_button_is_offered() {
    let env = Env::new(
        "[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600 # never-approved\"\n",
    );
    env.ok(&["up", "w"]);
    let list = env.ok(&["approve", "--list"]);
    assert!(
        !list.contains("pending") && list.contains("approvals are off"),
        "{list}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["approve", "--list", "--json"])).unwrap();
    assert_eq!(json, serde_json::json!([]));
    let mut b = signed_in(&env, 1);
    let shown = b.wait_for(
        "the approvals section",
        Duration::from_secs(60),
        "(document.getElementById('approvals') || {}).textContent",
    );
    assert!(
        shown.as_str().unwrap().contains("Approvals are off"),
        "{shown}"
    );
    let offered =
        b.eval("document.querySelectorAll('#approvals button, #approvals .panel').length");
    assert_eq!(offered, 0, "{shown}");
    env.ok(&["settings", "approvals=true"]);
    let shown = b.wait_for(
        "the pending approval with its button",
        Duration::from_secs(60),
        "document.querySelectorAll('#approvals .panel button').length === 1 && document.querySelector('#approvals .panel pre').textContent",
    );
    assert_eq!(shown, "sleep 600 # never-approved");
    let list = env.ok(&["approve", "--list"]);
    assert!(list.contains("pending"), "{list}");
    drop(b);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}

/// With approvals off nothing waits for a person, so nothing is approved either: the
/// dashboard's approve action (which the page does not offer then) and `binky approve` are
/// refused saying why, and nothing is recorded that would let the command run once
/// approvals are turned on.
#[test]
fn with_approvals_off_approving_is_refused_saying_why_and_records_nothing() {
    let env = Env::new(
        "[project]\nname = \"acme\"\n{range}\n\n[services.api]\ncmd = \"sleep 600 # never-approved\"\n",
    );
    env.ok(&["up", "w"]);
    // The command's key, as a person sees it while approvals are on.
    env.ok(&["settings", "approvals=true"]);
    let key_of = |env: &Env| -> (String, serde_json::Value) {
        let listed: serde_json::Value =
            serde_json::from_str(&env.ok(&["approve", "--list", "--json"])).unwrap();
        let c = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["command"] == "sleep 600 # never-approved")
            .cloned()
            .unwrap_or_else(|| panic!("not listed: {listed}"));
        (c["key"].as_str().unwrap().to_owned(), c["approved"].clone())
    };
    let (key, _) = key_of(&env);
    env.ok(&["settings", "approvals=false"]);

    // The dashboard, signed in and asked from its own page.
    let port = env.proxy_port();
    let host = format!("binky.localhost:{port}");
    let session = session_of(&sign_in_raw(&env, None));
    let r = post(
        port,
        &host,
        &format!("Cookie: {session}\r\nOrigin: http://{host}\r\n"),
        "/api/approve",
        &format!(r#"{{"key": "{key}"}}"#),
    );
    assert_eq!(status_code(&r), 409, "{r}");
    assert!(
        r.contains("nothing to approve: approvals are off on this machine")
            && r.contains("binky settings approvals=true"),
        "{r}"
    );
    // The command line, by key, for a world, and a pattern for `exec`.
    for args in [
        vec!["approve", key.as_str(), "--yes"],
        vec!["approve", "--all", "w", "--yes"],
        vec!["approve", "--exec", "npm test*", "--yes"],
    ] {
        let out = env.binky(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("nothing to approve: approvals are off on this machine"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Nothing was recorded: with approvals on, the command still waits for a person.
    env.ok(&["settings", "approvals=true"]);
    assert_eq!(key_of(&env).1, false);
    env.ok(&["settings", "approvals=false"]);
    env.ok(&["remove", "w"]);
    env.assert_nothing_left(&["w"]);
}
