//! A service's run has ended: what it was (a crash, an out-of-memory kill, a stop binky made
//! over its memory limit where nothing caps it) and what its restart policy makes of it.

use super::*;
use crate::process::resources::Oom;

impl<S: Supervisor> ProcessController<S> {
    /// The process exited: what its restart policy makes of it.
    pub(super) fn on_exit(
        &self,
        world: &World,
        name: &str,
        policy: Restart,
        row: &mut ProcessRow,
        exit: Exit,
    ) -> Result<(), StoreError> {
        let ran = ms_since(row.started_at);
        if ran >= self.config.stable_after {
            row.failures = 0;
        }
        // Its cgroup says whether the kernel killed it (or one of its processes) for memory.
        let run = row
            .pid
            .zip(row.start_time)
            .map(|(pid, start_time)| ProcId { pid, start_time });
        let oom = self.run_ended(world.id, name, run);
        let how = match oom {
            Some(oom) if oom.polled.is_some() => oom.describe(),
            Some(oom) if killed(exit) => format!("killed: {}", oom.describe()),
            Some(oom) => format!(
                "{exit}; {}: the kernel killed {} of its processes",
                oom.describe(),
                oom.kills
            ),
            None => exit.to_string(),
        };
        row.last_exit = Some(how.clone());
        row.last_exit_at = Some(now_ms());
        forget_process(row);
        row.healthy = false;
        // Stopped over its memory limit is a failure, however the service took its stop.
        let over_limit = oom.is_some_and(|o| o.polled.is_some());
        let failed = !exit.success() || over_limit;
        let restart = match policy {
            Restart::Always => true,
            Restart::OnFailure => failed,
            Restart::Never => false,
        };
        if restart {
            row.failures += 1;
            let delay = restart_delay(row.failures);
            row.state = ProcState::Backoff;
            row.next_start_at = Some(now_ms() + delay.as_millis() as i64);
            row.message = format!("{how} after {}; restarting in {}", secs(ran), secs(delay));
        } else if !failed {
            row.state = ProcState::Exited;
            row.message = format!("completed ({how}) after {}", secs(ran));
        } else {
            row.failures += 1;
            row.state = ProcState::Failed;
            row.message = format!("{how} after {} (restart = {})", secs(ran), policy.as_str());
        }
        match oom {
            Some(Oom {
                polled: Some(used),
                limit: Some(limit),
                ..
            }) => self.event(
                world.id,
                "oom",
                &polled_oom_event(name, limit, used, restart.then_some(policy)),
            ),
            Some(oom) => self.event(
                world.id,
                "oom",
                &format!(
                    "{name} ran {}: the kernel killed {} of its processes",
                    oom.describe(),
                    oom.kills
                ),
            ),
            None => {}
        }
        self.event(world.id, "exited", &format!("{name}: {}", row.message));
        self.save(world.id, row)
    }
}

/// The `oom` event of a service binky stopped over its memory limit `limit` with `used`
/// bytes resident (the polled mechanism), restarted under `restart` or (`None`) not.
fn polled_oom_event(name: &str, limit: u64, used: u64, restart: Option<Restart>) -> String {
    let then = match restart {
        Some(policy) => format!("stopped and restarted (restart = {})", policy.as_str()),
        None => "stopped, not restarted (restart = never)".to_owned(),
    };
    format!(
        "{name} went over its memory limit of {} ({} resident): {then}, as binky does where the system cannot cap memory",
        crate::limits::bytes(limit),
        crate::limits::bytes(used)
    )
}

/// It died by SIGKILL: the signal itself, or a shell reporting its child's (128 + 9).
fn killed(exit: Exit) -> bool {
    exit.signal == Some(9) || exit.code == Some(137)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_stopped_over_its_memory_limit_is_told_so_with_its_policy() {
        assert_eq!(
            polled_oom_event("api", 512 << 20, 600 << 20, Some(Restart::OnFailure)),
            "api went over its memory limit of 512 MiB (600 MiB resident): stopped and restarted (restart = on-failure), as binky does where the system cannot cap memory"
        );
        assert_eq!(
            polled_oom_event("api", 64 << 20, 65 << 20, None),
            "api went over its memory limit of 64 MiB (65 MiB resident): stopped, not restarted (restart = never), as binky does where the system cannot cap memory"
        );
        let oom = Oom {
            kills: 1,
            limit: Some(512 << 20),
            polled: Some(600 << 20),
        };
        assert_eq!(
            oom.describe(),
            "stopped over its memory limit of 512 MiB (it had 600 MiB resident), as binky does where the system cannot cap memory"
        );
        let kernel = Oom {
            polled: None,
            ..oom
        };
        assert_eq!(kernel.describe(), "out of memory (limit 512 MiB)");
    }
}
