//! A running service's health, checked again every `interval`: `retries` failures in a
//! row make it unhealthy, and then it is restarted (`on_unhealthy = "restart"`) or left
//! running and reported (`"keep"`).

use super::*;

/// A running service's last health check.
#[derive(Clone, Copy, Debug)]
pub(in crate::process) struct Check {
    /// When it ran (or when the service became ready).
    pub(super) at: std::time::Instant,
    /// Failed checks in a row.
    pub(super) failures: u32,
}

impl<S: Supervisor> ProcessController<S> {
    /// A running service with a health check: checked again every `interval`; `retries`
    /// failures in a row make it unhealthy, and then (`on_unhealthy = "restart"`, the
    /// default) it is stopped and started again like a crashed one.
    pub(super) async fn recheck(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        id: ProcId,
    ) -> Result<Flow, StoreError> {
        let Some(health) = s.process.health.as_ref() else {
            return Ok(Flow::Done(Step::ready()));
        };
        let interval = health.interval();
        let key = (s.world.id, s.name.to_owned());
        let now = std::time::Instant::now();
        let last = *self
            .checks
            .lock()
            .expect("checks lock")
            .entry(key.clone())
            .or_insert(Check {
                at: now,
                failures: 0,
            });
        let since = now.duration_since(last.at);
        let healthy_step = |row: &ProcessRow, wake: Duration| {
            if row.state == ProcState::Running {
                Step {
                    ready: true,
                    wake: Some(wake),
                    ..Step::default()
                }
            } else {
                self.unhealthy_step(s, row, wake)
            }
        };
        if since < interval {
            return Ok(Flow::Done(healthy_step(row, interval - since)));
        }
        let target = self.probe_target(s.name, s.svc, s.tokens, &s.resolved);
        let result = match &target {
            Some(t) => self.sup.probe(t, id).await,
            None => Ok(()),
        };
        let failures = match &result {
            Ok(()) => 0,
            Err(_) => last.failures + 1,
        };
        self.checks
            .lock()
            .expect("checks lock")
            .insert(key.clone(), Check { at: now, failures });
        match result {
            Ok(()) => {
                if row.state == ProcState::Unhealthy {
                    row.state = ProcState::Running;
                    row.healthy = true;
                    row.message = String::new();
                    self.event(s.world.id, "healthy", &format!("{}: healthy again", s.name));
                    self.save(s.world.id, row)?;
                }
                Ok(Flow::Done(healthy_step(row, interval)))
            }
            Err(failure) => {
                let why = match failure {
                    ProbeFailure::NotReady(why) | ProbeFailure::Foreign(why) => why,
                };
                if failures < health.retries() {
                    return Ok(Flow::Done(healthy_step(row, interval)));
                }
                let first = row.state == ProcState::Running;
                row.state = ProcState::Unhealthy;
                row.healthy = false;
                row.message = format!(
                    "unhealthy: health check failed {failures} times in a row, every {}: {why}",
                    secs(interval)
                );
                if first {
                    self.event(
                        s.world.id,
                        "unhealthy",
                        &format!("{}: {}", s.name, row.message),
                    );
                }
                if health.on_unhealthy == OnUnhealthy::Keep {
                    self.save(s.world.id, row)?;
                    return Ok(Flow::Done(self.unhealthy_step(s, row, interval)));
                }
                // Stopped and started again, as after a crash (its backoff included).
                self.sup.stop(id, self.config.stop_grace).await;
                self.release_cgroup(s.world.id, s.name);
                self.checks.lock().expect("checks lock").remove(&key);
                forget_process(row);
                row.failures += 1;
                row.last_exit = Some("unhealthy".into());
                row.last_exit_at = Some(now_ms());
                let delay = restart_delay(row.failures);
                row.state = ProcState::Backoff;
                row.next_start_at = Some(now_ms() + delay.as_millis() as i64);
                row.message = format!(
                    "stopped: health check failed {failures} times in a row ({why}); restarting in {}",
                    secs(delay)
                );
                self.event(
                    s.world.id,
                    "restart",
                    &format!("{}: {}", s.name, row.message),
                );
                self.save(s.world.id, row)?;
                Ok(Flow::Next)
            }
        }
    }

    /// An unhealthy service that is kept running: a person has to look.
    pub(super) fn unhealthy_step(&self, s: &Svc<'_>, row: &ProcessRow, wake: Duration) -> Step {
        Step {
            wake: Some(wake),
            problem: Some(Condition::failed(
                CONDITION,
                "Unhealthy",
                format!(
                    "{} is {} (on_unhealthy = \"keep\": binky leaves it running). Last output:\n{}",
                    s.name,
                    row.message,
                    log_tail(&s.log, 5)
                ),
            )),
            ..Step::default()
        }
    }
}
