//! A service and everything it starts, held together so it is stopped, measured and limited
//! as one.
//!
//! - Unix: the service leads a process group of its own (`process::in_new_group_async`); a
//!   graceful stop is its `stop_signal` to the group, the end is SIGKILL to the group. Limits
//!   are cgroups' (binky's `supervisor::cgroup`), not this module's.
//! - Windows: the service starts with `CREATE_NEW_PROCESS_GROUP` and is put, right after it
//!   is spawned, in a *named* Job object ([`name`]: the binky home's tag and the leader's pid
//!   and start time, so a daemon that knows the process can name its job). A graceful stop
//!   is `CTRL_BREAK_EVENT` to its console group (every `stop_signal` but SIGKILL maps to
//!   it: Windows has one console event a program can be sent that way); the end is
//!   `TerminateJobObject`, which ends every process of the job, however it was started.
//!   Its CPU is the job's accounting, its memory the sum of its processes' working sets,
//!   and its [`Limits`] the job's memory and CPU-rate limits.
//!
//! # Caveats (Windows)
//! - What the service starts in the moment between its spawn and its assignment to the job
//!   is not in the job (a `sh -c` takes longer than that to start anything); it is still
//!   found as a descendant by its recorded parent.
//! - A named job lives while a handle to it is open: the daemon keeps one per service. A
//!   daemon that restarts finds the job again by name only when another handle still holds
//!   it; otherwise it stops the leader and its descendants by their recorded parents.
//! - `CTRL_BREAK_EVENT` reaches a console group only from a process attached to the same
//!   console; where it cannot be sent, the stop goes straight to the end.

use std::io;

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

/// What a group uses, measured as a whole (no out-of-memory kills or throttling are
/// counted: a Job object does not say).
pub use crate::limits::Usage;

/// The name of the Job object of the service whose leader is `pid`, started at
/// `start_time`, in the binky home tagged `tag` (session-local: `Local\…`).
pub fn name(tag: &str, pid: u32, start_time: u64) -> String {
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("Local\\binky.{tag}.{pid}.{start_time}")
}

/// Windows' CPU rate for `percent` of one CPU on a machine of `cpus` CPUs: hundredths of a
/// percent of the whole machine, between 1 and 10 000.
pub fn cpu_rate(percent: f64, cpus: usize) -> u32 {
    let whole = percent / cpus.max(1) as f64;
    (whole * 100.0).round().clamp(1.0, 10_000.0) as u32
}

/// Holds the just-spawned `pid` (leading a group of its own) with everything it starts, and
/// applies `limits` to them. Windows: creates the named Job object, assigns the process to
/// it and keeps the handle until [`release`]. Unix: the group already holds it; `limits`
/// are not applied here (cgroups do that), so nothing is done.
pub fn hold(tag: &str, pid: u32, start_time: u64, limits: Limits) -> io::Result<()> {
    #[cfg(windows)]
    {
        win::hold(tag, pid, start_time, limits)
    }
    #[cfg(not(windows))]
    {
        let _ = (tag, pid, start_time, limits);
        Ok(())
    }
}

/// Finds the job of a service this daemon did not start (a daemon restarted): Windows
/// opens it by [`name`], `true` when it still exists. Unix: `true` (a group needs no
/// handle).
pub fn reopen(tag: &str, pid: u32, start_time: u64) -> bool {
    #[cfg(windows)]
    {
        win::reopen(tag, pid, start_time)
    }
    #[cfg(not(windows))]
    {
        let _ = (tag, pid, start_time);
        true
    }
}

/// Lets go of the job of the group led by `pgid` (it has ended).
pub fn release(pgid: u32) {
    #[cfg(windows)]
    win::release(pgid);
    #[cfg(not(windows))]
    let _ = pgid;
}

/// Asks the group led by `pgid` to stop: `signal` (a name of `signal::NAMES`) to the group
/// on Unix; on Windows `CTRL_BREAK_EVENT` to its console group, or, for SIGKILL, the end
/// ([`kill_group`]). A group that is gone is `NotFound`.
pub fn stop_gracefully(pgid: u32, signal: &str) -> io::Result<()> {
    #[cfg(unix)]
    {
        crate::signal::send_group(pgid, signal).map_err(gone_is_not_found)
    }
    #[cfg(windows)]
    {
        if group_gone(pgid) {
            return Err(io::Error::new(io::ErrorKind::NotFound, "the group is gone"));
        }
        if signal == "SIGKILL" {
            return kill_group(pgid);
        }
        win::ctrl_break(pgid)
    }
}

/// Ends every process of the group led by `pgid` at once: SIGKILL to the group on Unix;
/// `TerminateJobObject` on Windows (without a job: each of the leader's descendants). A
/// group that is gone is `NotFound`.
pub fn kill_group(pgid: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        crate::signal::send_group(pgid, "SIGKILL").map_err(gone_is_not_found)
    }
    #[cfg(windows)]
    {
        win::kill_group(pgid)
    }
}

/// Whether no live process is left of the group led by `pgid` (Windows: of its job, else
/// of the leader and its descendants).
pub fn group_gone(pgid: u32) -> bool {
    #[cfg(windows)]
    if let Some(active) = win::active_processes(pgid) {
        return active == 0;
    }
    crate::proc::group_gone(pgid)
}

/// The live processes of the group led by `pgid` (Windows: its job's, else the leader and
/// its descendants).
pub fn members(pgid: u32) -> Vec<u32> {
    #[cfg(windows)]
    if let Some(pids) = win::pids(pgid) {
        return pids;
    }
    crate::proc::group_members(pgid)
}

/// What the group led by `pgid` uses, measured as a whole: Windows, from its job. `None`
/// on Unix (binky reads the group's processes, or its cgroup) and for a group without a job.
pub fn usage(pgid: u32) -> Option<Usage> {
    #[cfg(windows)]
    {
        win::usage(pgid)
    }
    #[cfg(not(windows))]
    {
        let _ = pgid;
        None
    }
}

/// ESRCH (no such process group) as `NotFound`, which is how callers tell "gone".
#[cfg(unix)]
fn gone_is_not_found(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32) {
        io::Error::new(io::ErrorKind::NotFound, e)
    } else {
        e
    }
}

#[cfg(windows)]
mod win {
    use std::collections::HashMap;
    use std::io;
    use std::sync::Mutex;

    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::System::Console::{GenerateConsoleCtrlEvent, CTRL_BREAK_EVENT};
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation,
        JobObjectBasicProcessIdList, JobObjectCpuRateControlInformation,
        JobObjectExtendedLimitInformation, OpenJobObjectW, QueryInformationJobObject,
        SetInformationJobObject, TerminateJobObject, JOBOBJECTINFOCLASS,
        JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_CPU_RATE_CONTROL_INFORMATION,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_CPU_RATE_CONTROL_ENABLE,
        JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, JOB_OBJECT_LIMIT_JOB_MEMORY,
    };
    use windows_sys::Win32::System::Threading::{PROCESS_SET_QUOTA, PROCESS_TERMINATE};

    use super::{Limits, Usage};
    use crate::proc::windows::Process;

    /// `JOB_OBJECT_ALL_ACCESS`.
    const ALL_ACCESS: u32 = 0x001F_001F;

    /// A job handle, closed when dropped.
    struct Job(HANDLE);

    // SAFETY: a kernel handle may be used and closed from any thread.
    unsafe impl Send for Job {}

    impl Drop for Job {
        fn drop(&mut self) {
            // SAFETY: the handle is ours and open.
            unsafe {
                CloseHandle(self.0);
            }
        }
    }

    /// The jobs this process holds, by their leader's pid.
    static JOBS: Mutex<Option<HashMap<u32, Job>>> = Mutex::new(None);

    fn with_job<T>(pgid: u32, f: impl FnOnce(&Job) -> T) -> Option<T> {
        let jobs = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        jobs.as_ref()?.get(&pgid).map(f)
    }

    fn keep(pgid: u32, job: Job) {
        JOBS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(pgid, job);
    }

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().chain(std::iter::once(0)).collect()
    }

    fn check(ok: i32) -> io::Result<()> {
        if ok == 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    pub fn hold(tag: &str, pid: u32, start_time: u64, limits: Limits) -> io::Result<()> {
        let name = wide(&super::name(tag, pid, start_time));
        // SAFETY: a null security descriptor and a NUL-terminated name.
        let h = unsafe { CreateJobObjectW(std::ptr::null(), name.as_ptr()) };
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        let job = Job(h);
        let process = Process::open(pid, PROCESS_SET_QUOTA | PROCESS_TERMINATE)
            .ok_or_else(io::Error::last_os_error)?;
        // SAFETY: both handles are open with the rights the call needs.
        check(unsafe { AssignProcessToJobObject(job.0, process.handle()) })?;
        // Held from here on, whatever becomes of its limits.
        let limited = apply(&job, limits);
        keep(pid, job);
        limited
    }

    /// Sets the job's limits; an error names the limit the system refused (the job holds
    /// its processes all the same).
    fn apply(job: &Job, limits: Limits) -> io::Result<()> {
        let refused = |what: &str, e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("the job's {what} limit was refused ({e}); the service runs without it"),
            )
        };
        apply_memory(job, limits).map_err(|e| refused("memory", e))?;
        apply_cpu(job, limits).map_err(|e| refused("CPU rate", e))
    }

    fn apply_memory(job: &Job, limits: Limits) -> io::Result<()> {
        if let Some(bytes) = limits.memory_max_bytes {
            // SAFETY: a zeroed plain C struct, set and passed with its size.
            unsafe {
                let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
                info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_JOB_MEMORY;
                info.JobMemoryLimit = usize::try_from(bytes).unwrap_or(usize::MAX);
                set(job, JobObjectExtendedLimitInformation, &info)?;
            }
        }
        Ok(())
    }

    /// Sets one class of the job's information to `info`, the struct that class takes.
    ///
    /// # Safety
    /// `T` must be the struct Windows documents for `class`.
    unsafe fn set<T>(job: &Job, class: JOBOBJECTINFOCLASS, info: &T) -> io::Result<()> {
        check(SetInformationJobObject(
            job.0,
            class,
            (info as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        ))
    }

    fn apply_cpu(job: &Job, limits: Limits) -> io::Result<()> {
        if let Some(percent) = limits.cpu_max_percent {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            // SAFETY: as above.
            unsafe {
                let mut info: JOBOBJECT_CPU_RATE_CONTROL_INFORMATION = std::mem::zeroed();
                info.ControlFlags =
                    JOB_OBJECT_CPU_RATE_CONTROL_ENABLE | JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP;
                info.Anonymous.CpuRate = super::cpu_rate(percent, cpus);
                set(job, JobObjectCpuRateControlInformation, &info)?;
            }
        }
        Ok(())
    }

    pub fn reopen(tag: &str, pid: u32, start_time: u64) -> bool {
        if with_job(pid, |_| ()).is_some() {
            return true;
        }
        let name = wide(&super::name(tag, pid, start_time));
        // SAFETY: a NUL-terminated name.
        let h = unsafe { OpenJobObjectW(ALL_ACCESS, 0, name.as_ptr()) };
        if h.is_null() {
            return false;
        }
        keep(pid, Job(h));
        true
    }

    pub fn release(pgid: u32) {
        if let Some(jobs) = JOBS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            jobs.remove(&pgid);
        }
    }

    pub fn ctrl_break(pgid: u32) -> io::Result<()> {
        // SAFETY: a plain call.
        check(unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pgid) })
    }

    pub fn kill_group(pgid: u32) -> io::Result<()> {
        if let Some(r) = with_job(pgid, |job| {
            // SAFETY: the job's handle is open.
            check(unsafe { TerminateJobObject(job.0, 1) })
        }) {
            return r;
        }
        let members = crate::proc::group_members(pgid);
        if members.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "the group is gone"));
        }
        for pid in members {
            let _ = crate::proc::kill(pid);
        }
        Ok(())
    }

    fn accounting(job: &Job) -> Option<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION> {
        // SAFETY: a zeroed plain C struct, filled with its size.
        unsafe {
            let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = std::mem::zeroed();
            let ok = QueryInformationJobObject(
                job.0,
                JobObjectBasicAccountingInformation,
                (&mut info as *mut JOBOBJECT_BASIC_ACCOUNTING_INFORMATION).cast(),
                std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            );
            (ok != 0).then_some(info)
        }
    }

    pub fn active_processes(pgid: u32) -> Option<u32> {
        with_job(pgid, accounting)
            .flatten()
            .map(|a| a.ActiveProcesses)
    }

    fn job_pids(job: &Job) -> Option<Vec<u32>> {
        // Room for 1024 pids: the list is two u32 counts, then one pointer-sized id each.
        let mut buf = vec![0usize; 1024 + 1];
        // SAFETY: the buffer is passed with its size in bytes.
        let ok = unsafe {
            QueryInformationJobObject(
                job.0,
                JobObjectBasicProcessIdList,
                buf.as_mut_ptr().cast(),
                (buf.len() * std::mem::size_of::<usize>()) as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return None;
        }
        // The first pointer-sized word holds the two u32 counts; the second is the number
        // of ids in the list.
        let listed = (buf[0] as u64 >> 32) as usize;
        Some(
            buf.iter()
                .skip(1)
                .take(listed.min(1024))
                .map(|p| *p as u32)
                .collect(),
        )
    }

    pub fn pids(pgid: u32) -> Option<Vec<u32>> {
        with_job(pgid, job_pids).flatten()
    }

    pub fn usage(pgid: u32) -> Option<Usage> {
        let (acct, pids) = with_job(pgid, |job| (accounting(job), job_pids(job)))?;
        let acct = acct?;
        let ticks = (acct.TotalUserTime + acct.TotalKernelTime).max(0) as u64;
        Some(Usage {
            cpu_usec: ticks / 10,
            memory_bytes: pids
                .unwrap_or_default()
                .into_iter()
                .filter_map(crate::proc::rss_bytes)
                .sum(),
            ..Usage::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_jobs_name_is_its_homes_tag_and_its_leaders_identity() {
        assert_eq!(name("ab12", 42, 9_000), "Local\\binky.ab12.42.9000");
        // Nothing of the tag can reach outside the session's namespace.
        assert_eq!(name("a\\b/c", 1, 2), "Local\\binky.a_b_c.1.2");
    }

    #[test]
    fn a_cpu_limit_is_a_share_of_the_whole_machine_in_hundredths_of_a_percent() {
        assert_eq!(cpu_rate(100.0, 4), 2_500);
        assert_eq!(cpu_rate(50.0, 1), 5_000);
        assert_eq!(cpu_rate(800.0, 4), 10_000);
        assert_eq!(cpu_rate(0.0, 8), 1);
    }

    /// The test binary itself is the child (no outside program is needed on Windows): with
    /// this variable set, the test named below only waits to be stopped.
    const CHILD: &str = "BINKY_PLATFORM_JOB_CHILD";

    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < end, "never: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ends the group it names when dropped, so a failed assertion leaves nothing running.
    struct Ends(u32);

    impl Drop for Ends {
        fn drop(&mut self) {
            let _ = kill_group(self.0);
        }
    }

    fn child() -> std::process::Child {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "job::tests::a_child_in_a_job_is_seen_stopped_and_ended_with_its_tree",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "child")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        crate::process::in_new_group(&mut cmd).spawn().unwrap()
    }

    /// Start a child in a job, see it alive with a start time, see its grandchild among the
    /// job's members, stop it gracefully, then end a second one's whole tree.
    #[test]
    fn a_child_in_a_job_is_seen_stopped_and_ended_with_its_tree() {
        match std::env::var(CHILD).as_deref() {
            Ok("child") => {
                // A grandchild (not in a group of its own: it is the job's or the group's),
                // then wait to be stopped.
                let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
                cmd.args([
                    "--exact",
                    "job::tests::a_child_in_a_job_is_seen_stopped_and_ended_with_its_tree",
                    "--test-threads=1",
                ])
                .env(CHILD, "grandchild");
                let _ = cmd.spawn().unwrap().wait();
                return;
            }
            Ok(_) => {
                std::thread::sleep(Duration::from_secs(600));
                return;
            }
            Err(_) => {}
        }
        let tag = format!("test{}", std::process::id());

        // A graceful stop ends the group.
        let mut first = child();
        let pid = first.id();
        let _ends = Ends(pid);
        let start = crate::proc::stat(pid).unwrap().start_time;
        hold(&tag, pid, start, Limits::default()).unwrap();
        assert!(crate::proc::alive(pid, start));
        assert!(reopen(&tag, pid, start));
        until("the grandchild is a member", || members(pid).len() >= 2);
        assert!(!group_gone(pid));
        match stop_gracefully(pid, "SIGTERM") {
            Ok(()) => {}
            // Windows sends CTRL_BREAK only within one console; a test runner may have none.
            Err(e) if cfg!(windows) => {
                eprintln!("CTRL_BREAK not sent ({e}); ending the job instead");
                kill_group(pid).unwrap();
            }
            Err(e) => panic!("{e}"),
        }
        let _ = first.wait();
        until("the first group is gone", || group_gone(pid));
        assert!(!crate::proc::alive(pid, start));
        release(pid);

        // The end reaches every process of the tree, the grandchild too.
        let mut second = child();
        let pid = second.id();
        let _ends_too = Ends(pid);
        let start = crate::proc::stat(pid).unwrap().start_time;
        let limits = Limits {
            memory_max_bytes: Some(1 << 30),
            cpu_max_percent: Some(100.0),
        };
        match hold(&tag, pid, start, limits) {
            Ok(()) => {}
            // Wine has no CPU rate control; the job holds the process all the same.
            Err(e) if cfg!(windows) && e.to_string().contains("CPU rate limit was refused") => {
                eprintln!("{e}")
            }
            Err(e) => panic!("{e}"),
        }
        until("the grandchild is a member", || members(pid).len() >= 2);
        let tree = members(pid);
        if cfg!(windows) {
            let used = usage(pid).expect("a job's usage");
            assert!(used.memory_bytes > 0, "{used:?}");
        }
        kill_group(pid).unwrap();
        let _ = second.wait();
        until("the second tree is gone", || group_gone(pid));
        for p in tree {
            assert!(
                crate::proc::stat(p).is_none_or(|s| s.ended()),
                "{p} outlived its group"
            );
        }
        release(pid);
    }
}
