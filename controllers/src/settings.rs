//! The machine's settings (never a repository's `binky.toml`): every key, its default, what
//! it takes and what it does, in one list that `binky settings` shows and checks, the gate
//! reads its limits from, and the proxy and secrets read their keys from.
//!
//! # Guarantees
//! - A key not in [`ALL`] is refused by [`validate`], naming the keys there are.
//! - A value is stored in its normal form (`on` → `true`), checked against what its key takes;
//!   the error names the key and what it takes.
//! - A reader ([`Settings`]) gets a key's default when it is unset or (written by another
//!   binky) does not parse.

use std::collections::BTreeMap;

use crate::store::{self, Store, StoreError};
#[cfg(test)]
use crate::store::{DEFAULT_HTTPS_PORT, DEFAULT_PROXY_PORT};

/// What a setting's value may be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Takes {
    /// A whole number ≥ 0.
    Count,
    /// A percent from 0 to 90 (a reserve must leave something to use).
    Percent,
    /// A number of GiB ≥ 0.
    Gib,
    /// true or false (also on/off, yes/no, 1/0).
    Flag,
    /// Empty, or a text containing this placeholder.
    Template(&'static str),
    /// A port, set only by `binky port` with this flag (it moves the proxy too).
    Port(&'static str),
    /// A niceness from 0 to 19.
    Nice,
    /// A length of time: a whole number and a unit, `s`, `m`, `h` or `d` (`0`: none).
    Duration,
    /// Project names, comma-separated (`*`: every project; empty: none).
    Projects,
    /// Set only by this command (which does more than record it).
    SetBy(&'static str),
}

/// One machine setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// Its key.
    pub key: &'static str,
    /// Its value when unset.
    pub default: &'static str,
    /// What its value may be.
    pub takes: Takes,
    /// What it does, for `binky settings --describe`.
    pub what: &'static str,
}

/// Every machine setting, in the order `binky settings` lists them.
pub const ALL: &[Setting] = &[
    Setting {
        key: "max_parallel",
        default: "0",
        takes: Takes::Count,
        what: "running worlds at most (0: no limit); over it a world queues or, with cool_oldest, the least recently used one stops",
    },
    Setting {
        key: "ram_reserve_percent",
        default: "20",
        takes: Takes::Percent,
        what: "percent of memory kept available: a world does not start while less is, and with cool_under_pressure a running one is cooled (0: off)",
    },
    Setting {
        key: "disk_reserve_gib",
        default: "5",
        takes: Takes::Gib,
        what: "GiB kept free on the worktrees' filesystem: a world does not start while less is (0: off)",
    },
    Setting {
        key: "cool_under_pressure",
        default: "true",
        takes: Takes::Flag,
        what: "while less memory than ram_reserve_percent stays available for 6 s, cool the world admitted last (stopped; files, ports and data kept) and start it again by itself once memory is back",
    },
    Setting {
        key: "cool_oldest",
        default: "false",
        takes: Takes::Flag,
        what: "over max_parallel or the RAM reserve, cool the least recently used world not in focus instead of queueing (it starts again by itself when there is room)",
    },
    Setting {
        key: "focus_minutes",
        default: "5",
        takes: Takes::Count,
        what: "a world used (up, apply, reload) this recently is in focus and never cooled",
    },
    Setting {
        key: "approvals",
        default: "false",
        takes: Takes::Flag,
        what: "every new command a world would run waits for `binky approve`",
    },
    Setting {
        key: "mcp_remove_any",
        default: "false",
        takes: Takes::Flag,
        what: "`binky mcp`'s remove tool may remove worlds an agent did not create through it (never a worktree with uncommitted changes); off: only the worlds agents made",
    },
    Setting {
        key: "agent_projects",
        default: "",
        takes: Takes::Projects,
        what: "projects an agent may act on besides its own (comma-separated names; `*`: every project): its own is the repository `binky mcp` was started in, or the world a process binky started runs in; empty: only its own",
    },
    Setting {
        key: "nice",
        default: "10",
        takes: Takes::Nice,
        what: "the niceness every process of a world runs at (0 to 19; 0: binky's own), so the machine (its shells, editor and browser) stays responsive with many worlds busy",
    },
    Setting {
        key: "restart_hold_cpu_percent",
        default: "60",
        takes: Takes::Count,
        what: "while tasks wait for a CPU this percent of the time or more (10 s average; without the kernel's pressure figures, a load of 2 per CPU), a service failing its health checks is shown unhealthy and not restarted, so restarts do not add to the load (0: off)",
    },
    Setting {
        key: "golden_keep",
        default: "7d",
        takes: Takes::Duration,
        what: "how long a golden template no world uses any more is kept (e.g. 12h, 7d), so the next world is cloned from it instead of building it again; it goes sooner by `binky golden rm` or when the disk of binky's database servers has less than disk_reserve_gib free (0: when its last world goes)",
    },
    Setting {
        key: "secret_command",
        default: "",
        takes: Takes::Template("{ref}"),
        what: "how ${secret:REF} in env is resolved at spawn, `{ref}` replaced (e.g. `op read op://vault/{ref}`); unset: BINKY_SECRET_<REF> from the daemon's environment",
    },
    Setting {
        key: "proxy_port",
        default: "80",
        takes: Takes::Port("proxy"),
        what: "the proxy's HTTP port (0: off); set it with `binky port --proxy N`",
    },
    Setting {
        key: "https_port",
        default: "443",
        takes: Takes::Port("https"),
        what: "the proxy's HTTPS port (0: off); set it with `binky port --https N`",
    },
    Setting {
        key: "hosts_file",
        default: "",
        takes: Takes::SetBy("binky hosts --write"),
        what: "the hosts file whose binky block the daemon keeps current as worlds come and go (empty: none); set by `binky hosts --write`, cleared by `binky hosts --remove`",
    },
    Setting {
        key: "proxy_answer_timeout",
        default: "60s",
        takes: Takes::Duration,
        what: "how long the proxy waits for a service's answer (its status line and headers) once the request was sent; past it the browser gets a 504 page naming the service, and a refused connection stays a 502 (e.g. 5m for a slow report; 0: no limit). A body that streams is not limited once its head came",
    },
];

/// The setting `key`, if there is one.
pub fn find(key: &str) -> Option<&'static Setting> {
    ALL.iter().find(|s| s.key == key)
}

/// The default of `key` (empty for a key that is not a setting).
pub fn default_of(key: &str) -> &'static str {
    find(key).map_or("", |s| s.default)
}

/// A value `binky settings` refuses; the message names the key and the fix.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingError {
    /// No such key.
    #[error("no setting `{key}`; settings: {}", keys())]
    Unknown {
        /// The key given.
        key: String,
    },
    /// The value is not what the key takes.
    #[error("{key} takes {takes}, not `{value}`")]
    Value {
        /// The key.
        key: &'static str,
        /// What it takes, in words.
        takes: &'static str,
        /// The value given.
        value: String,
    },
    /// A template without its placeholder.
    #[error("{key} must contain {placeholder} where the reference goes, e.g. `op read op://vault/{placeholder}` (got `{value}`)")]
    Placeholder {
        /// The key.
        key: &'static str,
        /// The placeholder it needs.
        placeholder: &'static str,
        /// The value given.
        value: String,
    },
    /// A key only a command sets (it does more than record the value).
    #[error("{key} is not set by hand: `{command}` sets it, as it does what the setting records")]
    SetBy {
        /// The key.
        key: &'static str,
        /// The command that sets it.
        command: &'static str,
    },
    /// A key another command sets.
    #[error(
        "{key} is set with `binky port` (it also moves the proxy): binky port --{flag} {value}"
    )]
    SetByPort {
        /// The key.
        key: &'static str,
        /// `binky port`'s flag for it.
        flag: &'static str,
        /// The value given.
        value: String,
    },
}

fn keys() -> String {
    ALL.iter().map(|s| s.key).collect::<Vec<_>>().join(", ")
}

/// A flag's value as the settings read it.
pub fn on(v: &str) -> bool {
    matches!(v, "true" | "1" | "yes" | "on")
}

/// Check `value` for `key`: its normal form to store, or why not.
pub fn validate(key: &str, value: &str) -> Result<String, SettingError> {
    let setting = find(key).ok_or_else(|| SettingError::Unknown {
        key: key.to_owned(),
    })?;
    let v = value.trim();
    let bad = |takes: &'static str| SettingError::Value {
        key: setting.key,
        takes,
        value: v.to_owned(),
    };
    match setting.takes {
        Takes::Count => v
            .parse::<u64>()
            .map(|n| n.to_string())
            .map_err(|_| bad("a whole number ≥ 0")),
        Takes::Percent => match v.parse::<f64>() {
            Ok(n) if (0.0..=90.0).contains(&n) => Ok(v.to_owned()),
            _ => Err(bad("a percent from 0 to 90")),
        },
        Takes::Gib => match v.parse::<f64>() {
            Ok(n) if n >= 0.0 && n.is_finite() => Ok(v.to_owned()),
            _ => Err(bad("a number of GiB ≥ 0")),
        },
        Takes::Flag => match v {
            "true" | "on" | "yes" | "1" => Ok("true".into()),
            "false" | "off" | "no" | "0" => Ok("false".into()),
            _ => Err(bad("true or false")),
        },
        Takes::Nice => match v.parse::<u8>() {
            Ok(n) if n <= 19 => Ok(n.to_string()),
            _ => Err(bad("a niceness from 0 to 19")),
        },
        Takes::Duration => match duration(v) {
            Some(_) if v == "0" => Ok("0".into()),
            Some(_) => Ok(v.to_owned()),
            None => Err(bad(
                "a length of time: a whole number and s, m, h or d (7d, 12h, 90s; 0: none)",
            )),
        },
        Takes::Projects => projects(v).ok_or_else(|| {
            bad("project names separated by commas (letters, digits, `-`, `_` or `.`), or `*` for every project")
        }),
        Takes::Template(p) if v.is_empty() || v.contains(p) => Ok(v.to_owned()),
        Takes::Template(placeholder) => Err(SettingError::Placeholder {
            key: setting.key,
            placeholder,
            value: v.to_owned(),
        }),
        Takes::SetBy(command) => Err(SettingError::SetBy {
            key: setting.key,
            command,
        }),
        Takes::Port(flag) => Err(SettingError::SetByPort {
            key: setting.key,
            flag,
            value: v.to_owned(),
        }),
    }
}

/// A list of project names in its normal form (`a,b`, each once; `*` alone; empty), or
/// `None` when a name is not one a project may have.
fn projects(v: &str) -> Option<String> {
    let mut names: Vec<&str> = Vec::new();
    for n in v.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let ok = n == "*"
            || (n.len() <= 63
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
        if !ok {
            return None;
        }
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if names.contains(&"*") {
        return Some("*".into());
    }
    Some(names.join(","))
}

/// Whether the setting `agent_projects`' value `v` lets an agent act on project `name`
/// (besides its own).
pub fn lists_project(v: &str, name: &str) -> bool {
    v.split(',').map(str::trim).any(|n| n == "*" || n == name)
}

/// A length of time as settings write it: `0`, or a whole number and a unit (`90s`, `30m`,
/// `12h`, `7d`).
pub fn duration(v: &str) -> Option<std::time::Duration> {
    let v = v.trim();
    if v == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let unit = v.chars().last()?;
    let n: u64 = v[..v.len() - unit.len_utf8()].parse().ok()?;
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    n.checked_mul(secs).map(std::time::Duration::from_secs)
}

/// The niceness a world's processes run at (the `nice` setting; its default when the store
/// cannot be read).
pub fn nice(store: &Store) -> i32 {
    Settings::read(store)
        .map(|s| s.number::<i32>("nice"))
        .unwrap_or_else(|_| default_of("nice").parse().unwrap_or_default())
        .clamp(0, 19)
}

/// The machine settings, read in one query; a key not set has its default.
pub struct Settings(BTreeMap<String, String>);

impl Settings {
    /// Read them all.
    pub fn read(store: &Store) -> Result<Settings, StoreError> {
        Ok(Settings(store.read(store::settings)?))
    }

    /// `key`'s value, or its default.
    pub fn get(&self, key: &str) -> &str {
        self.0
            .get(key)
            .map_or_else(|| default_of(key), String::as_str)
    }

    /// `key`'s value if it was set.
    pub fn set(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A numeric setting; one that does not parse has its default.
    pub fn number<T: std::str::FromStr + Default>(&self, key: &str) -> T {
        self.get(key)
            .parse()
            .or_else(|_| default_of(key).parse())
            .unwrap_or_default()
    }

    /// A yes/no setting.
    pub fn flag(&self, key: &str) -> bool {
        on(self.get(key))
    }

    /// A length of time; one that does not parse has its default.
    pub fn duration(&self, key: &str) -> std::time::Duration {
        duration(self.get(key))
            .or_else(|| duration(default_of(key)))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_errors_say_what_the_key_takes() {
        assert_eq!(validate("max_parallel", " 8").unwrap(), "8");
        assert_eq!(
            validate("max_parallel", "-1").unwrap_err().to_string(),
            "max_parallel takes a whole number ≥ 0, not `-1`"
        );
        assert!(validate("ram_reserve_percent", "95").is_err());
        assert_eq!(validate("ram_reserve_percent", "12.5").unwrap(), "12.5");
        assert!(validate("disk_reserve_gib", "inf").is_err());
        assert_eq!(validate("cool_oldest", "on").unwrap(), "true");
        assert_eq!(validate("approvals", "0").unwrap(), "false");
        assert_eq!(validate("nice", "19").unwrap(), "19");
        assert_eq!(
            validate("nice", "-5").unwrap_err().to_string(),
            "nice takes a niceness from 0 to 19, not `-5`"
        );
        assert!(validate("approvals", "maybe").is_err());
        assert_eq!(validate("golden_keep", " 12h").unwrap(), "12h");
        assert_eq!(validate("golden_keep", "0").unwrap(), "0");
        assert_eq!(validate("proxy_answer_timeout", "5m").unwrap(), "5m");
        assert!(validate("proxy_answer_timeout", "soon")
            .unwrap_err()
            .to_string()
            .contains("proxy_answer_timeout takes a length of time"));
        assert_eq!(duration("90s"), Some(std::time::Duration::from_secs(90)));
        assert_eq!(
            duration("7d"),
            Some(std::time::Duration::from_secs(7 * 86_400))
        );
        for bad in ["7", "d", "-1h", "1.5h", "1w", "h1"] {
            assert!(
                validate("golden_keep", bad)
                    .unwrap_err()
                    .to_string()
                    .contains("golden_keep takes a length of time"),
                "{bad}"
            );
        }
        assert!(validate("secret_command", "op read x")
            .unwrap_err()
            .to_string()
            .contains("must contain {ref}"));
        assert_eq!(validate("secret_command", "").unwrap(), "");
        assert_eq!(
            validate("agent_projects", " shop, web ,shop").unwrap(),
            "shop,web"
        );
        assert_eq!(validate("agent_projects", "shop,*").unwrap(), "*");
        assert_eq!(validate("agent_projects", "").unwrap(), "");
        assert!(validate("agent_projects", "shop;rm")
            .unwrap_err()
            .to_string()
            .contains("agent_projects takes project names"));
        assert!(lists_project("shop,web", "web") && lists_project("*", "any"));
        assert!(!lists_project("shop,web", "we") && !lists_project("", "shop"));
        assert!(validate("proxy_port", "8080")
            .unwrap_err()
            .to_string()
            .contains("binky port --proxy 8080"));
        let unknown = validate("nope", "1").unwrap_err().to_string();
        for s in ALL {
            assert!(unknown.contains(s.key), "{unknown}");
        }
    }

    #[test]
    fn every_default_is_a_value_its_key_takes_and_the_ports_match_the_constants() {
        for s in ALL {
            match s.takes {
                // Set by their commands only: refused by hand, naming the command.
                Takes::Port(_) | Takes::SetBy(_) => {
                    let err = validate(s.key, s.default).unwrap_err().to_string();
                    assert!(err.contains("binky "), "{err}");
                }
                _ => assert_eq!(validate(s.key, s.default).as_deref(), Ok(s.default)),
            }
        }
        assert_eq!(default_of("proxy_port"), DEFAULT_PROXY_PORT.to_string());
        assert_eq!(default_of("https_port"), DEFAULT_HTTPS_PORT.to_string());
        assert_eq!(default_of("nope"), "");
    }
}
