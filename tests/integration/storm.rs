//! A storm of `kill -9`s of the daemon while worlds with a PostgreSQL and a Redis slice come
//! up, go down and are removed; then everything converges and nothing is left.
//!
//! `BINKY_STORM_OPS` (default 48) and `BINKY_STORM_SEED` size and pick the storm;
//! `BINKY_STORM_KILL=0` runs the same operations without a kill (the calm comparator);
//! `benchmarks/storm.sh` runs both long (150 operations) and reports them side by side.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::harness::*;

const WORLDS: usize = 6;

/// A small deterministic generator (the storm is repeatable from its seed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The newest event's id: grows whenever binky (a command or the daemon) records anything.
fn events_of(store: &binky_controllers::store::Store) -> i64 {
    store
        .read(binky_controllers::store::last_event_id)
        .unwrap_or(0)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_storm_of_daemon_kills_during_up_down_and_remove_converges_and_leaks_nothing() {
    crate::pg_server::pg_bin_dir().expect("postgresql installed (./scripts/test installs it)");
    let ops = env_number("BINKY_STORM_OPS", 48) as usize;
    let seed = env_number("BINKY_STORM_SEED", 20261203);
    let kill = env_number("BINKY_STORM_KILL", 1) != 0;
    let env = Env::new(&format!(
        r#"
[project]
name = "storm"
{{range}}

[services.db]
adapter = "postgres"

[services.cache]
adapter = "redis"

[services.api]
cmd = "{SERVE}"
url = true
depends_on = ["db", "cache"]
"#
    ));
    // One reader of the home's store for the whole storm (Env::new made it).
    let store = binky_controllers::store::Store::open(&env.home.join("state.db")).unwrap();
    let names: Vec<String> = (0..WORLDS).map(|i| format!("s{i}")).collect();
    let mut rng = Lcg(seed);
    let mut kills = 0;
    let mut codes: std::collections::BTreeMap<i32, usize> = Default::default();
    let started = Instant::now();
    // The worlds this storm has made and not removed (an op on a world that is not there
    // is an `up`).
    let mut made: BTreeSet<String> = BTreeSet::new();
    for i in 0..ops {
        let world = &names[rng.below(WORLDS as u64) as usize];
        let op = match rng.below(4) {
            _ if !made.contains(world) => "up",
            0 | 1 => "up",
            2 => "down",
            _ => "remove",
        };
        let before = events_of(&store);
        let out = env.binky(&[op, world, "--no-wait"]);
        let code = out.status.code().unwrap_or(-1);
        *codes.entry(code).or_default() += 1;
        let err = stderr(&out);
        // Never a crash, never a lock error; 0 done, 1 an `up` of a world being removed,
        // 2 a `down`/`remove` of a world that is gone, 75 recorded while no daemon could be
        // reached.
        assert!(
            matches!(code, 0 | 1 | 2 | 75),
            "op {i}: {op} {world} exited {code}: {err}"
        );
        assert!(!err.contains("database is locked"), "op {i}: {err}");
        assert!(!err.contains("panicked"), "op {i}: {err}");
        match code {
            1 => assert!(err.contains("being removed"), "op {i}: {op} {world}: {err}"),
            2 => assert!(err.contains("no world"), "op {i}: {op} {world}: {err}"),
            _ => {}
        }
        if code == 0 || code == 75 {
            if op == "remove" {
                made.remove(world);
            } else {
                made.insert(world.clone());
            }
        }
        // Kill the daemon three times in four, once it has started on the change.
        if rng.below(4) != 0 && kill {
            let until = Instant::now() + Duration::from_secs(2);
            while events_of(&store) == before && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if let Some(pid) = env.daemon_pid() {
                signal(pid, 9);
                kills += 1;
                wait_until("the killed daemon is gone", Duration::from_secs(5), || {
                    !alive(pid)
                });
            }
        }
    }
    let storm = started.elapsed();

    // Converge: the worlds being removed go, every other world comes up, whole.
    let converge = Instant::now();
    env.ok(&["daemon", "start"]);
    let removing = || -> Vec<String> {
        env.status()["worlds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["state"] == "removing")
            .map(|w| w["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let until = Instant::now() + Duration::from_secs(180);
    while !removing().is_empty() {
        if Instant::now() > until {
            let mut why = String::new();
            for w in removing() {
                why.push_str(&env.ok(&["status", &w]));
                why.push_str(&env.ok(&["events", &w, "-n", "60"]));
            }
            panic!("removals did not finish in 180 s:\n{why}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Every world comes up: the ones the storm left, and the ones it removed, made again.
    let existing = names.clone();
    for w in &existing {
        let out = env.binky(&["up", w, "--timeout", "180s"]);
        assert!(
            out.status.success(),
            "up {w} after the storm: {}",
            stderr(&out)
        );
    }
    let converged = converge.elapsed();
    // One process per world's service, no duplicate group, every port its own.
    let procs = env.our_processes();
    assert_eq!(
        procs.len(),
        existing.len(),
        "processes {procs:?} for worlds {existing:?}"
    );
    let ports: BTreeSet<u16> = existing.iter().map(|w| env.port_of(w, "api")).collect();
    assert_eq!(ports.len(), existing.len());
    for w in &existing {
        assert_eq!(
            served_env(env.port_of(w, "api"))["BINKY_WORKTREE"],
            w.as_str()
        );
    }

    // Remove everything: no process, worktree, branch, port or slice is left.
    for w in &existing {
        env.ok(&["remove", w, "--timeout", "180s"]);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    env.assert_nothing_left(&refs);
    assert_eq!(env.git(&["branch", "--list"]), "* main", "branches left");
    let gc = env.ok(&["gc"]);
    assert!(!gc.contains("slices that belong to no world"), "{gc}");
    eprintln!(
        "storm report: seed {seed}, {ops} operations, {kills} daemon kills, exit codes {codes:?}, \
         storm {:.1}s, {} worlds converged in {:.1}s, 0 duplicate processes, 0 orphans, \
         0 slices/worktrees/branches/ports left",
        storm.as_secs_f64(),
        existing.len(),
        converged.as_secs_f64()
    );
}
