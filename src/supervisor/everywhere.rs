//! The real supervisor on every system (CI runs these under Wine as well as on Linux): a
//! service started in a group of its own (its Job object on Windows), seen running, its
//! crash seen with its exit code, started again as the process controller restarts a
//! crashed service, and stopped, nothing of it left. The decision to restart is the
//! controllers' (their tests run under Wine too); this is what carries it out.
//!
//! The service is this test binary run again: no shell program or tool is needed beyond
//! the system's own shell (`sh`; `cmd` under Wine, which has no Git for Windows).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use binky_controllers::limits::ResourceLimits;
use binky_controllers::runtime::Trigger;
use binky_controllers::supervisor::{
    Exit, Liveness, ProcId, SpawnSpec, StopHow, Stopped, Supervisor,
};

use super::RealSupervisor;

/// What this binary does when the supervisor runs it as a service: `exit:N` ends with code
/// N; `serve` runs until it is stopped.
const ROLE: &str = "BINKY_TEST_SUPERVISED_ROLE";

/// Not a test of its own: the service's body, when [`ROLE`] is set.
#[test]
fn supervised_child() {
    match std::env::var(ROLE).as_deref() {
        Ok("serve") => loop {
            std::thread::sleep(Duration::from_secs(1));
        },
        Ok(role) => {
            let code = role.strip_prefix("exit:").and_then(|c| c.parse().ok());
            std::process::exit(code.unwrap_or(99));
        }
        Err(_) => {}
    }
}

fn spec(dir: &std::path::Path, role: &str) -> SpawnSpec {
    let exe = std::env::current_exe().unwrap().display().to_string();
    let exe = if exe.contains(' ') {
        format!("\"{exe}\"")
    } else {
        exe
    };
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    env.insert(ROLE.to_owned(), role.to_owned());
    SpawnSpec {
        world: 1,
        service: "api".to_owned(),
        cmd: format!("{exe} --exact supervisor::everywhere::supervised_child --test-threads 1"),
        workdir: dir.to_owned(),
        env,
        log: dir.join("api.log"),
        token: "binky-test-token".to_owned(),
        task: false,
        nice: 0,
        limits: ResourceLimits::default(),
    }
}

async fn ended(sup: &RealSupervisor, id: ProcId) -> Exit {
    let limit = Instant::now() + Duration::from_secs(60);
    loop {
        if let Liveness::Exited(exit) = sup.liveness(1, id) {
            return exit;
        }
        assert!(Instant::now() < limit, "{id:?} still runs after 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_runs_its_crash_is_seen_it_starts_again_and_stops_with_nothing_left() {
    let dir = tempfile::tempdir().unwrap();
    let sup = RealSupervisor::new("binkytest".to_owned(), Trigger::default());

    // A crash: the service exits 3 on its own.
    let crashed = sup.spawn(&spec(dir.path(), "exit:3")).await.unwrap();
    let exit = ended(&sup, crashed).await;
    let log = std::fs::read_to_string(dir.path().join("api.log")).unwrap_or_default();
    assert_eq!(exit.code, Some(3), "{exit:?}\n{log}");

    // Started again, it runs, in a group (a Job object on Windows) of its own.
    let again = sup.spawn(&spec(dir.path(), "serve")).await.unwrap();
    assert_ne!(again, crashed);
    assert_eq!(sup.liveness(1, again), Liveness::Running);
    assert!(
        binky_platform::job::members(again.pid).contains(&again.pid),
        "{:?} holds {:?}",
        again,
        binky_platform::job::members(again.pid)
    );

    // Stopped: nothing of its group is left.
    let stopped = sup.stop(again, StopHow::term(Duration::from_secs(5))).await;
    if cfg!(unix) {
        // SIGTERM ends it within its grace.
        assert!(matches!(stopped, Stopped::Exited(_)), "{stopped:?}");
    } else {
        // Ctrl-Break, else the job ended (Wine refuses the Ctrl-Break of a process without
        // a console: docs/platforms.md).
        assert!(
            matches!(stopped, Stopped::Exited(_) | Stopped::Killed),
            "{stopped:?}"
        );
    }
    assert!(binky_platform::job::group_gone(again.pid));
    assert!(!binky_platform::proc::alive(again.pid, again.start_time));
}
