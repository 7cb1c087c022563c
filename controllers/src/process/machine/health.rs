//! A running service's health, checked again every `interval` (each check may take the
//! health `timeout` to answer): `retries` failures in a row make it unhealthy, and then it
//! is restarted (`on_unhealthy = "restart"`) or left running and reported (`"keep"`).
//!
//! # Not a restart storm
//! A service that fails its checks because the machine is saturated (a restart of a dev
//! server under load took 93–130 s, adding to the load) is not restarted while it is: it
//! is shown unhealthy, saying why, and checked again. And restarts for failed checks have
//! a budget: [`HEALTH_RESTARTS`] in [`HEALTH_RESTART_WINDOW`]; past it, the service is
//! left running, shown unhealthy, until a check passes (a crash still restarts it, with
//! its backoff).

/// Restarts for failed health checks a service gets in [`HEALTH_RESTART_WINDOW`].
pub const HEALTH_RESTARTS: usize = 3;

/// The window of the health restart budget.
pub const HEALTH_RESTART_WINDOW: Duration = Duration::from_secs(10 * 60);

use super::*;
use crate::spec::{Health, DEFAULT_HEALTH_INTERVAL};
use crate::store::WorldId;

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
        if since < interval {
            return Ok(Flow::Done(self.checked_step(s, row, interval - since)));
        }
        let target = self.probe_target(s.world, s.name, s.svc, s.tokens, &s.resolved);
        let result = match &target {
            Some(t) => self.sup.probe(t, id, health.timeout()).await,
            None => Ok(()),
        };
        let failures = match &result {
            Ok(()) => 0,
            Err(_) => last.failures + 1,
        };
        self.checks
            .lock()
            .expect("checks lock")
            .insert(key, Check { at: now, failures });
        match result {
            Ok(()) => {
                if row.state == ProcState::Unhealthy {
                    row.state = ProcState::Running;
                    row.healthy = true;
                    row.message = String::new();
                    self.event(s.world.id, "healthy", &format!("{}: healthy again", s.name));
                    self.save(s.world.id, row)?;
                }
                Ok(Flow::Done(self.checked_step(s, row, interval)))
            }
            Err(_) if failures < health.retries() => {
                Ok(Flow::Done(self.checked_step(s, row, interval)))
            }
            Err(failure) => {
                self.unhealthy(s, health, row, id, failures, &failure.text())
                    .await
            }
        }
    }

    /// What a checked service's step is, to be checked again after `wake`: ready while it
    /// runs healthy, else what its being unhealthy says.
    fn checked_step(&self, s: &Svc<'_>, row: &ProcessRow, wake: Duration) -> Step {
        if row.state == ProcState::Running {
            Step {
                ready: true,
                wake: Some(wake),
                ..Step::default()
            }
        } else {
            self.unhealthy_step(s, row, wake)
        }
    }

    /// A service whose `health` check failed `failures` times in a row (`why`, the last):
    /// unhealthy, and restarted unless its `on_unhealthy` keeps it or a restart is held.
    async fn unhealthy(
        &self,
        s: &Svc<'_>,
        health: &Health,
        row: &mut ProcessRow,
        id: ProcId,
        failures: u32,
        why: &str,
    ) -> Result<Flow, StoreError> {
        let interval = health.interval();
        let key = (s.world.id, s.name.to_owned());
        let held_before = row.message.contains("not restarted:");
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
        if let Some(held) = self.restart_held(s, &key) {
            row.message =
                format!("unhealthy: health checks failing ({why}); not restarted: {held}");
            // Said once each time it starts being held, not at every check.
            if !held_before {
                self.event(
                    s.world.id,
                    "restart_held",
                    &format!("{}: {}", s.name, row.message),
                );
            }
            self.save(s.world.id, row)?;
            return Ok(Flow::Done(self.unhealthy_step(s, row, interval)));
        }
        self.restart_unhealthy(s, row, id, failures, why).await?;
        Ok(Flow::Next)
    }

    /// Stops an unhealthy service and starts it again, as after a crash (its backoff
    /// included).
    async fn restart_unhealthy(
        &self,
        s: &Svc<'_>,
        row: &mut ProcessRow,
        id: ProcId,
        failures: u32,
        why: &str,
    ) -> Result<(), StoreError> {
        let key = (s.world.id, s.name.to_owned());
        self.health_restarts
            .lock()
            .expect("health restarts lock")
            .entry(key.clone())
            .or_default()
            .push(std::time::Instant::now());
        self.sup.stop(id, self.stop_how(Some(s.process))).await;
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
        self.save(s.world.id, row)
    }

    /// Why a service failing its checks is not restarted now, if it is not: the machine is
    /// saturated, or its restart budget is spent.
    fn restart_held(&self, s: &Svc<'_>, key: &(WorldId, String)) -> Option<String> {
        let hold_at = crate::settings::Settings::read(&self.store)
            .map(|s| s.number::<u32>("restart_hold_cpu_percent"))
            .unwrap_or(0);
        if let Some(why) = (hold_at > 0)
            .then(|| self.sup.saturated(f64::from(hold_at)))
            .flatten()
        {
            return Some(format!(
                "the machine is saturated ({why}): a restart would add to the load; checked again every {}",
                secs(s.process.health.as_ref().map_or(DEFAULT_HEALTH_INTERVAL, |h| h.interval()))
            ));
        }
        let mut budget = self.health_restarts.lock().expect("health restarts lock");
        let recent = budget.entry(key.clone()).or_default();
        recent.retain(|t| t.elapsed() < HEALTH_RESTART_WINDOW);
        (recent.len() >= HEALTH_RESTARTS).then(|| {
            format!(
                "restarted {} times for failed checks in {} (its budget); left running until a check passes or `binky reload {}`",
                recent.len(),
                secs(HEALTH_RESTART_WINDOW),
                s.world.name
            )
        })
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
