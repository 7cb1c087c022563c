//! `[defaults]`: `workdir`, `restart`, `limits`, `env` and the stop keys (`stop_signal`,
//! `stop_grace_period`, `stop_after_dependents`), and the readers of `restart` and `limits` a
//! process service shares with it.

use binky_controllers::limits::{parse_cpu, parse_memory, LimitError};
use binky_controllers::spec::{Limits, Restart, Stopping};
use toml::de::DeValue;

use super::cx::join;
use super::{Cx, Table};

const DEFAULTS_KEYS: &[&str] = &[
    "workdir",
    "restart",
    "limits",
    "env",
    "stop_signal",
    "stop_grace_period",
    "stop_after_dependents",
];
const LIMITS_KEYS: &[&str] = &["cpu", "memory"];

/// What a process service gets for the keys it leaves out.
pub(super) struct Defaults {
    /// `workdir` (".").
    pub(super) workdir: String,
    /// `restart` (on-failure).
    pub(super) restart: Restart,
    /// `limits` (none).
    pub(super) limits: Option<Limits>,
    /// `env`: variables every service starts from (a process service's own `env`, an
    /// adapter service's `env` for `migrate` and `seed`), its own keys winning.
    pub(super) env: std::collections::BTreeMap<String, String>,
    /// `stop_signal`, `stop_grace_period`, `stop_after_dependents` (SIGTERM, the daemon's
    /// grace, every service at once).
    pub(super) stop: Stopping,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            workdir: ".".into(),
            restart: Restart::default(),
            limits: None,
            env: Default::default(),
            stop: Stopping::default(),
        }
    }
}

impl Cx<'_> {
    /// The `[defaults]` table of `root`, or the built-in defaults.
    pub(super) fn defaults(&mut self, root: &Table<'_>) -> Defaults {
        let Some(v) = Self::get(root, "defaults") else {
            return Defaults::default();
        };
        let Some(t) = self.expect_table(v, "defaults") else {
            return Defaults::default();
        };
        self.unknown_keys(t, "defaults", DEFAULTS_KEYS);
        Defaults {
            workdir: self
                .string(t, "defaults", "workdir")
                .unwrap_or_else(|| ".".into()),
            restart: self.restart(t, "defaults").unwrap_or_default(),
            limits: self.limits(t, "defaults"),
            env: self.string_map(t, "defaults", "env").unwrap_or_default(),
            stop: self.stopping(t, "defaults", &Stopping::default()),
        }
    }

    pub(super) fn restart(&mut self, table: &Table<'_>, path: &str) -> Option<Restart> {
        let v = Self::get(table, "restart")?;
        let s = self.string_value(v, &join(path, "restart"))?;
        match s.as_str() {
            "on-failure" => Some(Restart::OnFailure),
            "always" => Some(Restart::Always),
            "never" => Some(Restart::Never),
            other => {
                self.error(
                    v.span(),
                    &join(path, "restart"),
                    format!("unknown restart policy `{other}`"),
                    Some("use one of: on-failure, always, never".to_owned()),
                );
                None
            }
        }
    }

    pub(super) fn limits(&mut self, table: &Table<'_>, path: &str) -> Option<Limits> {
        let v = Self::get(table, "limits")?;
        let path = join(path, "limits");
        let t = self.expect_table(v, &path)?;
        self.unknown_keys(t, &path, LIMITS_KEYS);
        Some(Limits {
            cpu: self.limit(t, &path, "cpu", |s| parse_cpu(s).map(|_| ())),
            memory: self.limit(t, &path, "memory", |s| parse_memory(s).map(|_| ())),
        })
    }

    /// One value of `limits`, as written; a value binky cannot read is an error on its key
    /// that says how to write it. A bare number (`cpu = 0.5`, `memory = 536870912`) is
    /// taken as if quoted.
    fn limit(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
        parse: fn(&str) -> Result<(), LimitError>,
    ) -> Option<String> {
        let v = Self::get(table, key)?;
        let path = join(path, key);
        let text = match v.get_ref() {
            DeValue::Integer(_) | DeValue::Float(_) => self
                .text
                .get(v.span())
                .unwrap_or("")
                .trim()
                .replace('_', ""),
            _ => self.string_value(v, &path)?,
        };
        if let Err(e) = parse(&text) {
            self.error(v.span(), &path, e.message, Some(e.fix));
        }
        Some(text)
    }
}
