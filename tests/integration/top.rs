//! `binky top` in a real terminal: tmux (a private server per test) runs a shell of a fixed
//! size, the test types into it (`send-keys`) and reads the screen (`capture-pane`).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::harness::*;

/// A tmux server of its own (`tmux -L <name>`) running one shell; killed on drop, with
/// everything in it.
struct Tmux {
    socket: String,
    server: u32,
    /// Its socket file, which `kill-server` leaves behind.
    socket_path: String,
}

impl Tmux {
    /// A `cols`×`rows` pane running `sh` in `dir`, with the test's home and an
    /// xterm-256color terminal, as over ssh.
    fn start(env: &Env, dir: &Path, cols: u16, rows: u16) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "tmux is not installed: the terminal UI tests need it (`apt-get install tmux`; \
             ./scripts/test installs it)"
        );
        let socket = format!("binky-top-{}-{}", std::process::id(), env.ports.low);
        let home = format!("BINKY_HOME={}", env.home.display());
        let token = format!("API_TOKEN={TOKEN}");
        let (c, r) = (cols.to_string(), rows.to_string());
        // TERM and PS1 through `env`: tmux sets TERM itself, and dash its own prompt.
        let out = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &c, "-y", &r, "-c"])
            .arg(dir)
            .args(["-e", &home, "-e", &token])
            .arg("exec env TERM=xterm-256color LANG=C.UTF-8 PS1='shell$ ' sh")
            .current_dir(dir)
            .env_remove("TMUX")
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux: {}", stderr(&out));
        let mut tmux = Tmux {
            socket,
            server: 0,
            socket_path: String::new(),
        };
        tmux.server = tmux.show("#{pid}").parse().unwrap();
        tmux.socket_path = tmux.show("#{socket_path}");
        tmux.screen_shows("the shell's prompt", |s| s.contains("shell$"));
        tmux
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap()
    }

    /// A tmux format of the pane (`#{pane_pid}`).
    fn show(&self, format: &str) -> String {
        let out = self.tmux(&["display-message", "-p", format]);
        assert!(out.status.success(), "tmux: {}", stderr(&out));
        stdout(&out).trim().to_owned()
    }

    /// Type `keys` (tmux key names: `Enter`, `Down`, or a letter).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "tmux send-keys: {}", stderr(&out));
    }

    /// Type `text` literally.
    fn type_line(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-l", text]);
        assert!(out.status.success(), "tmux send-keys: {}", stderr(&out));
        self.keys(&["Enter"]);
    }

    /// The screen's text now.
    fn screen(&self) -> String {
        stdout(&self.tmux(&["capture-pane", "-p"]))
    }

    /// Wait until the screen satisfies `f`; the screen then. Fails with the last screen.
    fn screen_shows(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        self.screen_shows_within(what, Duration::from_secs(30), f)
    }

    fn screen_shows_within(&self, what: &str, limit: Duration, f: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                started.elapsed() < limit,
                "timed out waiting for the screen to show {what}; it shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The selected line (drawn with `>` in front).
    fn selected(&self) -> String {
        self.screen()
            .lines()
            .find(|l| l.starts_with('>'))
            .unwrap_or_default()
            .to_owned()
    }

    /// Select the first line from the top that satisfies `f`, moving down with `j`.
    fn select(&self, what: &str, f: impl Fn(&str) -> bool) {
        // `g`: the first world, under the header, the column names and the project.
        self.keys(&["g"]);
        let screen = self.screen_shows("the first world selected", |s| {
            s.lines().nth(3).is_some_and(|l| l.starts_with('>'))
        });
        let mut line = screen.lines().nth(3).unwrap_or_default().to_owned();
        while !f(&line) {
            self.keys(&["j"]);
            let before = line.clone();
            self.screen_shows(&format!("the selection to move on to {what}"), |_| {
                line_after(self, &before).is_some()
            });
            line = self.selected();
        }
    }

    /// The processes the shell runs now (the command typed into it, and its children).
    fn running(&self) -> Vec<u32> {
        let shell: u32 = self.show("#{pane_pid}").parse().unwrap();
        binky_testkit::procs::tree(shell)
            .into_iter()
            .filter(|p| *p != shell)
            .collect()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        let gone = binky_testkit::wait::wait_for(
            Duration::from_secs(5),
            Duration::from_millis(50),
            || self.server == 0 || !alive(self.server),
        );
        if !self.socket_path.is_empty() {
            let _ = std::fs::remove_file(&self.socket_path);
        }
        if !gone {
            signal(self.server, 9);
            if !std::thread::panicking() {
                panic!("the tmux server {} outlived kill-server", self.server);
            }
        }
    }
}

/// The selected line, once it is no longer `before` (None while it still is, or at the end).
fn line_after(tmux: &Tmux, before: &str) -> Option<String> {
    let now = tmux.selected();
    (now != before).then_some(now)
}

/// The line of the screen that names `name` as a word (a world's or a service's line).
fn line_of<'s>(screen: &'s str, name: &str) -> Option<&'s str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
}

/// The world's line says `state`.
fn world_is(screen: &str, world: &str, state: &str) -> bool {
    line_of(screen, world).is_some_and(|l| l.split_whitespace().any(|w| w == state))
}

fn state_of(env: &Env, world: &str) -> String {
    env.status()["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == world)
        .map(|w| w["state"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// A secret the talker prints (scrubbed from its log), handed to it through the
/// environment of `binky up`, as binky.toml asks.
const TOKEN: &str = "hunter2-very-secret";

fn talking() -> String {
    format!(
        r#"
[project]
name = "acme"
{{range}}

[services.api]
cmd = "{SERVE}"
url = "api"

[services.talker]
cmd = "i=0; while true; do i=$((i+1)); echo \"talker line $i token $API_TOKEN\"; sleep 0.2; done"
env = {{ API_TOKEN = "${{env.API_TOKEN}}" }}
"#
    )
}

/// Type `binky top` into the shell.
fn start_top(tmux: &Tmux) {
    tmux.type_line(&format!("{} top", binky_bin()));
}

#[test]
fn top_shows_the_worlds_follows_a_log_and_brings_a_world_down_and_up() {
    let env = Env::new(&talking());
    for world in ["alpha", "beta"] {
        let out = env.binky_env(&["up", world], &[("API_TOKEN", TOKEN)]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let tmux = Tmux::start(&env, &env.repo, 160, 45);
    start_top(&tmux);

    // The table: both worlds ready, their services running with ports and URLs.
    let screen = tmux.screen_shows("both worlds ready", |s| {
        world_is(s, "alpha", "ready") && world_is(s, "beta", "ready")
    });
    assert!(screen.contains("2 worlds: 2 ready"), "{screen}");
    assert!(screen.contains("daemon pid"), "{screen}");
    let api_port = env.port_of("beta", "api").to_string();
    assert!(
        screen.lines().any(|l| l.contains("api")
            && l.contains("running")
            && l.contains(&api_port)
            && l.contains("http://api.beta.acme.localhost")),
        "beta's api line: port {api_port} and URL\n{screen}"
    );

    // Select beta's talker (the last line) and open the log pane: its lines appear, and
    // keep coming, with the token scrubbed.
    tmux.keys(&["G", "Enter"]);
    let screen = tmux.screen_shows("beta's talker log", |s| {
        s.contains("talker of acme/beta") && s.contains("talker line")
    });
    let last = |s: &str| -> u32 {
        s.lines()
            .filter_map(|l| l.split("talker line ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .max()
            .unwrap_or(0)
    };
    let first = last(&screen);
    tmux.screen_shows("new log lines", |s| last(s) > first + 2);
    let screen = tmux.screen();
    assert!(screen.contains("token [secret]"), "{screen}");
    assert!(
        !screen.contains("hunter2"),
        "a secret on the screen:\n{screen}"
    );

    // `d` brings the selected line's world down, through `binky down`.
    tmux.keys(&["d"]);
    tmux.screen_shows("beta stopped", |s| world_is(s, "beta", "stopped"));
    assert_eq!(state_of(&env, "beta"), "stopped");
    assert_eq!(state_of(&env, "alpha"), "ready");
    assert!(tmux.screen().contains("binky down beta: down requested"));

    // `u` with a broken binky.toml: the CLI's refusal is shown, nothing changes.
    let config = env.worktree("beta").join("binky.toml");
    let good = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        good.replace("[services.api]", "[services.api]\nbogus = 1"),
    )
    .unwrap();
    tmux.keys(&["u"]);
    let screen = tmux.screen_shows("the refusal", |s| {
        s.contains("binky up beta:") && s.contains("bogus")
    });
    assert!(world_is(&screen, "beta", "stopped"), "{screen}");
    assert_eq!(state_of(&env, "beta"), "stopped");

    // Fixed, `u` brings it up again.
    std::fs::write(&config, &good).unwrap();
    tmux.keys(&["u"]);
    tmux.screen_shows("beta ready again", |s| world_is(s, "beta", "ready"));
    assert_eq!(state_of(&env, "beta"), "ready");

    // `r` on alpha (the first line) restarts its services on the same ports.
    let pid = env.pid_of("alpha", "api").unwrap();
    tmux.keys(&["g", "r"]);
    tmux.screen_shows("the reload requested", |s| {
        s.contains("binky reload alpha: reload requested")
    });
    wait_until("alpha's api restarted", Duration::from_secs(30), || {
        env.pid_of("alpha", "api").is_some_and(|p| p != pid) && state_of(&env, "alpha") == "ready"
    });

    // `q`: the shell is back, on the main screen, and binky top is gone.
    tmux.keys(&["q"]);
    tmux.screen_shows("the shell again", |s| {
        s.contains("shell$") && !s.contains("NAME")
    });
    wait_until("binky top gone", Duration::from_secs(5), || {
        tmux.running().is_empty()
    });
    assert_eq!(
        tmux.show("#{alternate_on}"),
        "0",
        "left on the alternate screen"
    );
    assert_eq!(tmux.show("#{cursor_flag}"), "1", "the cursor left hidden");
}

#[test]
fn top_scrolls_through_forty_worlds() {
    let env =
        Env::new("[project]\nname = \"many\"\n{range}\n\n[services.job]\ncmd = \"sleep 600\"\n");
    let names: Vec<String> = (1..=40).map(|i| format!("w{i:02}")).collect();
    for n in &names {
        env.ok(&["up", n, "--no-wait"]);
    }
    let tmux = Tmux::start(&env, &env.repo, 120, 30);
    start_top(&tmux);
    let screen = tmux.screen_shows("the first worlds", |s| {
        s.contains("40 worlds") && line_of(s, "w01").is_some()
    });
    assert!(line_of(&screen, "w40").is_none(), "all fit?\n{screen}");
    // The last line: w40's job, scrolled into view and selected.
    tmux.keys(&["G"]);
    let screen = tmux.screen_shows("the last world", |s| line_of(s, "w40").is_some());
    assert!(line_of(&screen, "w01").is_none(), "{screen}");
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with('>') && l.contains("job")),
        "the selection is on the last line:\n{screen}"
    );
    // Page up twice, then the first line again.
    tmux.keys(&["PageUp", "PageUp", "g"]);
    // (Page up shows w01 before `g` selects it: wait for the selection, not the line.)
    tmux.screen_shows("the first world selected again", |s| {
        line_of(s, "w01").is_some_and(|l| l.starts_with('>'))
    });
    // Every world comes up (or waits in the queue, as the gate decides): none fails.
    tmux.screen_shows_within("no world starting", Duration::from_secs(180), |s| {
        let header = s.lines().next().unwrap_or("");
        !header.contains("starting") && !header.contains("failed")
    });
    tmux.keys(&["q"]);
    wait_until("binky top gone", Duration::from_secs(5), || {
        tmux.running().is_empty()
    });
}

#[test]
fn top_gives_the_terminal_back_when_terminated() {
    let env = Env::new(&talking());
    let tmux = Tmux::start(&env, &env.repo, 100, 30);
    // SIGTERM, SIGINT (from `kill`: Ctrl-C is a key in raw mode), SIGHUP.
    for (round, sig) in [15, 2, 1].into_iter().enumerate() {
        tmux.type_line("clear");
        start_top(&tmux);
        // No world yet: it says how to make one.
        tmux.screen_shows("the empty table", |s| {
            s.contains("0 worlds") && s.contains("no worlds yet")
        });
        let top = tmux.running();
        assert_eq!(top.len(), 1, "{top:?}");
        signal(top[0], sig);
        tmux.screen_shows("the shell again", |s| !s.contains("no worlds yet"));
        wait_until("binky top gone", Duration::from_secs(5), || {
            tmux.running().is_empty()
        });
        assert_eq!(
            tmux.show("#{alternate_on}"),
            "0",
            "signal {sig}: left on the alternate screen"
        );
        assert_eq!(
            tmux.show("#{cursor_flag}"),
            "1",
            "signal {sig}: the cursor left hidden"
        );
        // The shell reads lines again (raw mode is off): a typed command runs.
        tmux.type_line(&format!("echo back-$((40+{round}))"));
        let answer = format!("back-{}", 40 + round);
        tmux.screen_shows("the shell's answer", |s| s.contains(&answer));
    }
}

#[test]
fn top_without_a_terminal_says_what_to_use_instead() {
    let env = Env::new(&talking());
    // `binky dashboard --tui` is the same view, as binky 0.1.2's `binky dashboard`.
    for args in [&["top"][..], &["dashboard", "--tui"]] {
        let out = env.binky(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = stderr(&out);
        assert!(
            err.contains("binky top draws on a terminal") && err.contains("binky status"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn top_says_which_service_is_unhealthy_and_why_a_world_waits() {
    let env = Env::new(&format!(
        r#"
[project]
name = "acme"
{{range}}

[services.api]
cmd = "touch ok && {SERVE}"
url = "api"
health = {{ cmd = "test -f ok", interval = "200ms", retries = 2, on_unhealthy = "keep" }}
"#
    ));
    env.ok(&["up", "first"]);
    env.ok(&["settings", "max_parallel=1"]);
    // Held at the gate (`--no-wait`: written, not waited for).
    let held = env.binky(&["up", "second", "--no-wait"]);
    assert!(held.status.success(), "{}", stderr(&held));
    let tmux = Tmux::start(&env, &env.repo, 160, 30);
    start_top(&tmux);
    let screen = tmux.screen_shows("second queued and why", |s| {
        world_is(s, "second", "queued")
            && line_of(s, "second").is_some_and(|l| l.contains("max_parallel = 1"))
    });
    assert!(world_is(&screen, "first", "ready"), "{screen}");

    // first's api fails its health check and is kept running: unhealthy, the world failed.
    std::fs::remove_file(env.worktree("first").join("ok")).unwrap();
    let screen = tmux.screen_shows("api unhealthy", |s| {
        s.lines()
            .any(|l| l.contains("api") && l.contains("unhealthy"))
    });
    let api = env.services("first")[0].clone();
    assert_eq!(api["state"], "unhealthy", "{api}");
    let unhealthy = screen
        .lines()
        .find(|l| l.contains("unhealthy") && l.contains("api"))
        .unwrap();
    assert!(unhealthy.contains("health check failed"), "{screen}");
    tmux.screen_shows("first failed", |s| world_is(s, "first", "failed"));

    // Healthy again: running, and the world ready.
    std::fs::write(env.worktree("first").join("ok"), "").unwrap();
    tmux.screen_shows("first ready again", |s| world_is(s, "first", "ready"));
    tmux.keys(&["q"]);
    wait_until("binky top gone", Duration::from_secs(5), || {
        tmux.running().is_empty()
    });
}

#[test]
fn top_shows_replicas_and_shared_services_with_their_own_logs() {
    let env = Env::new(&format!(
        r#"
[project]
name = "mailer"
{{range}}

[services.mail]
cmd = "{SERVE}"
url = true
shared = true

[services.api]
cmd = "{SERVE}"
url = true
replicas = 2
depends_on = ["mail"]
"#
    ));
    env.ok(&["up", "w1"]);
    let services = env.services("w1");
    let port = |name: &str| {
        services
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["ports"][""].as_u64())
            .unwrap_or_else(|| panic!("no port of {name} in {services:?}"))
    };
    let (mail, api1) = (port("mail"), port("api.1"));
    let tmux = Tmux::start(&env, &env.repo, 160, 40);
    start_top(&tmux);
    let screen = tmux.screen_shows("w1 ready with its replicas", |s| {
        world_is(s, "w1", "ready") && line_of(s, "api.1").is_some()
    });
    assert!(screen.contains("mail (shared)"), "{screen}");
    let shared = line_of(&screen, "@shared").unwrap_or_default();
    assert!(
        shared.contains("ready") && !shared.contains("branch"),
        "{screen}"
    );

    // The shared mail's log is its shared world's; a replica's is its own.
    tmux.select("w1's shared mail", |l| l.contains("mail (shared)"));
    tmux.keys(&["Enter"]);
    tmux.screen_shows("mail's output", |s| {
        s.contains("mail of mailer/w1") && s.contains(&format!("listening on {mail}"))
    });
    tmux.select("api.1", |l| l.contains("api.1"));
    tmux.screen_shows("api.1's output", |s| {
        s.contains("api.1 of mailer/w1") && s.contains(&format!("listening on {api1}"))
    });

    // The shared world is not brought down by hand: the CLI's refusal is shown.
    tmux.select("the shared world", |l| {
        l.split_whitespace().nth(1) == Some("@shared")
    });
    tmux.keys(&["d"]);
    tmux.screen_shows("the refusal", |s| {
        s.contains("binky down @shared:") && s.contains("runs the shared services")
    });
    assert_eq!(state_of(&env, "w1"), "ready");
    tmux.keys(&["q"]);
    wait_until("binky top gone", Duration::from_secs(5), || {
        tmux.running().is_empty()
    });
}
