//! A service and everything it starts, held together so it can be stopped, measured and
//! limited as one: on Windows a *named* Job object (a restarted daemon opens it again by its
//! name); on Unix a process group, with limits in cgroups (`binky::supervisor::cgroup`).

/// Limits on a whole service (every process of its job), as Windows' Job objects enforce
/// them: `JOB_OBJECT_LIMIT_JOB_MEMORY` for memory, a hard CPU rate cap
/// (`JOBOBJECT_CPU_RATE_CONTROL_INFORMATION`) for CPU. `None`: no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    /// The most committed memory the job's processes may hold together, in bytes.
    pub memory_max_bytes: Option<u64>,
    /// The most CPU the job may use, in percent of one CPU (150.0: one and a half CPUs).
    pub cpu_max_percent: Option<f64>,
}
