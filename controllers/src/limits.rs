//! A service's `limits` in machine units: `memory` in bytes, `cpu` in thousandths of a core,
//! read from what `binky.toml` says (`memory = "512M"`, `cpu = "0.5"`).
//!
//! # Units
//! - `memory`: bytes (`536870912`, `512B`), or a number with `K`, `M`, `G` or `T`, each
//!   1024 times the one before, as systemd reads `MemoryMax=`, so a value written for binky
//!   0.1.2 (which handed it to systemd) means the same:
//!   `512M` = `512Mi` = `512MiB` = 512 × 1024² bytes. Decimals are fine (`1.5G`); case is
//!   not (`512m` is 512 MiB, never millibytes). At least 1 MiB.
//! - `cpu`: a share of cores: `0.5` (half a core), `2` (two cores), `500m` (500 millicores,
//!   as Kubernetes writes it) or `50%` (as systemd's `CPUQuota=`). At least `0.01`.

use std::fmt;

use crate::spec::Limits;

/// The smallest memory limit: below it nothing starts (a shell alone needs more).
pub const MIN_MEMORY: u64 = 1 << 20;

/// The smallest CPU limit, in millicores (the kernel's smallest quota is 1 ms per 100 ms).
pub const MIN_CPU_MILLIS: u32 = 10;

/// Limits a process runs under, in machine units; `None`: no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceLimits {
    /// Memory, in bytes.
    pub memory: Option<u64>,
    /// CPU time, in thousandths of a core (`500` = half a core).
    pub cpu_millis: Option<u32>,
}

impl ResourceLimits {
    /// No limit at all.
    pub fn is_none(&self) -> bool {
        self.memory.is_none() && self.cpu_millis.is_none()
    }
}

impl fmt::Display for ResourceLimits {
    /// `memory 512 MiB, cpu 0.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(m) = self.memory {
            parts.push(format!("memory {}", bytes(m)));
        }
        if let Some(c) = self.cpu_millis {
            parts.push(format!("cpu {}", cores(c)));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A size in binary units, the way people read it: `512 MiB`, `1.5 GiB`, `900 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// Millicores as cores: `0.5`, `2`, `0.25`.
pub fn cores(millis: u32) -> String {
    let s = format!("{}.{:03}", millis / 1000, millis % 1000);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// How this machine enforces `limits` (decided once by the supervisor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// A cgroup of binky's in the cgroup v2 hierarchy (`memory.max`, `cpu.max`).
    CgroupV2,
    /// Cgroups of binky's in cgroup v1's memory and cpu hierarchies
    /// (`memory.limit_in_bytes`, `cpu.cfs_quota_us`).
    CgroupV1,
    /// `systemd-run --scope` with `MemoryMax=` and `CPUQuota=`.
    SystemdRun,
    /// The Job object each service runs in (Windows): its memory limit and CPU rate.
    JobObject,
    /// binky itself, where nothing the system offers caps a service (macOS, the BSDs; Linux
    /// without cgroups or `systemd-run`): a service over its memory limit at a sample is
    /// stopped and restarted, and one with a CPU limit below the machine's cores runs at a
    /// lower priority. Neither is a cap.
    Polled,
    /// Nothing enforces them.
    #[default]
    None,
}

impl Mechanism {
    /// Its name in the store and `--json`: `cgroup-v2`, `cgroup-v1`, `systemd-run`,
    /// `job-object`, `polled`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::CgroupV2 => "cgroup-v2",
            Mechanism::CgroupV1 => "cgroup-v1",
            Mechanism::SystemdRun => "systemd-run",
            Mechanism::JobObject => "job-object",
            Mechanism::Polled => "polled",
            Mechanism::None => "none",
        }
    }

    /// Read back from [`Mechanism::as_str`]; an unknown word is `None`.
    pub fn parse(s: &str) -> Mechanism {
        match s {
            "cgroup-v2" => Mechanism::CgroupV2,
            "cgroup-v1" => Mechanism::CgroupV1,
            "systemd-run" => Mechanism::SystemdRun,
            "job-object" => Mechanism::JobObject,
            "polled" => Mechanism::Polled,
            _ => Mechanism::None,
        }
    }

    /// It enforces limits (the polled mechanism too, which does not cap them: see
    /// [`Mechanism::caps`]).
    pub fn enforces(self) -> bool {
        self != Mechanism::None
    }

    /// The system holds the service's processes under its limits (a cgroup, a scope, a Job
    /// object): memory cannot go over, CPU is throttled.
    pub fn caps(self) -> bool {
        !matches!(self, Mechanism::Polled | Mechanism::None)
    }

    /// For people: `cgroup v1`, `systemd-run scope`, `Job object`, `binky's polling, not
    /// capped`, `not enforced`.
    pub fn label(self) -> &'static str {
        match self {
            Mechanism::CgroupV2 => "cgroup v2",
            Mechanism::CgroupV1 => "cgroup v1",
            Mechanism::SystemdRun => "systemd-run scope",
            Mechanism::JobObject => "Job object",
            Mechanism::Polled => "binky's polling, not capped",
            Mechanism::None => "not enforced",
        }
    }
}

/// A value of `limits` binky cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LimitError {
    /// Which key: `cpu` or `memory`.
    pub key: &'static str,
    /// What is wrong.
    pub message: String,
    /// How to write it.
    pub fix: String,
}

const MEMORY_FIX: &str = "write bytes, or a number with K, M, G or T (1024-based, as systemd): memory = \"512M\", \"1.5G\"";
const CPU_FIX: &str =
    "write a share of CPU cores: cpu = \"0.5\" (half a core), \"2\" (two cores), \"500m\" or \"50%\"";

/// Bytes of a memory limit (`512M`, `1Gi`, `1.5G`, `1048576`).
pub fn parse_memory(text: &str) -> Result<u64, LimitError> {
    let bad = |message: String| LimitError {
        key: "memory",
        message,
        fix: MEMORY_FIX.to_owned(),
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| bad(format!("`{text}` is not a size")))?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .or_else(|| unit.strip_suffix('i'))
        .unwrap_or(&unit);
    let mult: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => {
            return Err(bad(format!(
                "`{text}`: unknown unit (K, M, G or T, or none for bytes)"
            )))
        }
    };
    let n = value * mult as f64;
    if n >= u64::MAX as f64 {
        return Err(bad(format!("`{text}` is too large")));
    }
    let n = n as u64;
    if n < MIN_MEMORY {
        return Err(bad(format!(
            "`{text}` is less than 1 MiB: no process starts under that"
        )));
    }
    Ok(n)
}

/// Millicores of a CPU limit (`0.5` → 500, `2` → 2000, `500m` → 500, `50%` → 500).
pub fn parse_cpu(text: &str) -> Result<u32, LimitError> {
    let bad = |message: String| LimitError {
        key: "cpu",
        message,
        fix: CPU_FIX.to_owned(),
    };
    let t = text.trim();
    let (num, per) = if let Some(n) = t.strip_suffix('m') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('%') {
        (n, 10.0)
    } else {
        (t, 1000.0)
    };
    let value: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| bad(format!("`{text}` is not a number of cores")))?;
    let millis = (value * per).round();
    if millis > 1_000_000.0 {
        return Err(bad(format!("`{text}` is more cores than any machine has")));
    }
    let millis = millis as u32;
    if millis < MIN_CPU_MILLIS {
        return Err(bad(format!(
            "`{text}` is less than 0.01 of a core, the smallest share the kernel gives"
        )));
    }
    Ok(millis)
}

impl Limits {
    /// The limits in machine units; the first value that does not read, with its key.
    pub fn resolve(&self) -> Result<ResourceLimits, LimitError> {
        Ok(ResourceLimits {
            memory: self.memory.as_deref().map(parse_memory).transpose()?,
            cpu_millis: self.cpu.as_deref().map(parse_cpu).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_as_systemd_reads_it_1024_based() {
        let mib = 1u64 << 20;
        for (text, want) in [
            ("512M", 512 * mib),
            ("512Mi", 512 * mib),
            ("512MiB", 512 * mib),
            ("512MB", 512 * mib),
            ("512m", 512 * mib),
            ("1G", 1024 * mib),
            ("1Gi", 1024 * mib),
            ("1.5G", 1536 * mib),
            ("2048K", 2 * mib),
            ("1T", 1 << 40),
            ("1048576", mib),
            ("1048576B", mib),
            (" 64 M ", 64 * mib),
        ] {
            assert_eq!(parse_memory(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_memory_values_say_what_and_how() {
        for (text, says) in [
            ("lots", "is not a size"),
            ("", "is not a size"),
            ("512X", "unknown unit"),
            ("5 12M", "unknown unit"),
            ("-1G", "is not a size"),
            ("100K", "less than 1 MiB"),
            ("0", "less than 1 MiB"),
            ("99999999999T", "too large"),
        ] {
            let e = parse_memory(text).unwrap_err();
            assert_eq!(e.key, "memory");
            assert!(e.message.contains(says), "{text}: {}", e.message);
            assert!(e.fix.contains("memory = \"512M\""), "{}", e.fix);
        }
    }

    #[test]
    fn cpu_is_a_share_of_cores() {
        for (text, want) in [
            ("0.5", 500),
            ("2", 2000),
            ("1", 1000),
            ("0.25", 250),
            ("500m", 500),
            ("1500m", 1500),
            ("50%", 500),
            ("200%", 2000),
            ("0.01", 10),
        ] {
            assert_eq!(parse_cpu(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_cpu_values_say_what_and_how() {
        for (text, says) in [
            ("half", "not a number of cores"),
            ("-1", "not a number of cores"),
            ("0", "less than 0.01"),
            ("0.001", "less than 0.01"),
            ("5000000", "more cores"),
            ("2 cpus", "not a number of cores"),
        ] {
            let e = parse_cpu(text).unwrap_err();
            assert_eq!(e.key, "cpu");
            assert!(e.message.contains(says), "{text}: {}", e.message);
            assert!(e.fix.contains("cpu = \"0.5\""), "{}", e.fix);
        }
    }

    #[test]
    fn limits_show_in_the_units_people_read() {
        let l = Limits {
            cpu: Some("0.5".into()),
            memory: Some("512M".into()),
        }
        .resolve()
        .unwrap();
        assert_eq!(l.to_string(), "memory 512 MiB, cpu 0.5");
        assert_eq!(bytes(64 << 20), "64 MiB");
        assert_eq!(bytes(1536 << 20), "1.5 GiB");
        assert_eq!(bytes(900), "900 B");
        assert_eq!(cores(2000), "2");
        assert_eq!(cores(250), "0.25");
        assert!(ResourceLimits::default().is_none());
        let e = Limits {
            cpu: Some("x".into()),
            memory: None,
        }
        .resolve()
        .unwrap_err();
        assert_eq!(e.key, "cpu");
    }

    #[test]
    fn every_mechanism_reads_back_from_its_name_and_only_none_enforces_nothing() {
        for m in [
            Mechanism::CgroupV2,
            Mechanism::CgroupV1,
            Mechanism::SystemdRun,
            Mechanism::JobObject,
            Mechanism::Polled,
            Mechanism::None,
        ] {
            assert_eq!(Mechanism::parse(m.as_str()), m, "{}", m.as_str());
            assert_eq!(m.enforces(), m != Mechanism::None);
            assert_eq!(
                m.caps(),
                !matches!(m, Mechanism::Polled | Mechanism::None),
                "{}",
                m.as_str()
            );
        }
        assert_eq!(Mechanism::Polled.label(), "binky's polling, not capped");
        assert_eq!(Mechanism::JobObject.label(), "Job object");
        assert_eq!(Mechanism::parse("cgroup-v3"), Mechanism::None);
    }
}
