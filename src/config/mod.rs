//! `binky.toml`: parse and validate every key, with the file, line, key path and the fix
//! in every error.
//!
//! The file is parsed into a spanned tree first, then walked by hand: that is what lets an
//! error say `services.web.cmdd` at line 7 and suggest `cmd`, instead of a serde message
//! without a key path. All errors of a file are reported at once.
//!
//! One module per table of the format (`project`, `defaults`, `services` with `process`
//! and `resources`, `groups`, `agents`, `hooks`); `cx` holds the reads they share.

mod agents;
mod cx;
mod defaults;
mod groups;
mod hooks;
mod process;
mod project;
mod resources;
mod services;
mod stop;

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use binky_controllers::spec::Spec;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

pub use cx::{distance as edit_distance, suggest};
// Durations are read below config too (an external adapter's timeout): one parser.
pub use crate::duration::parse_duration;
pub use project::dns_name_problem;
use services::DepSpans;
pub use stop::parse_signal;

/// The config file's name.
pub const FILE_NAME: &str = "binky.toml";

/// One problem in a `binky.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// Dotted key path (`services.web.cmd`), or empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n  fix: {fix}")?;
        }
        Ok(())
    }
}

/// Every problem found in a file (never empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        if n > 1 {
            writeln!(f, "{n} problems in binky.toml:")?;
        }
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A footgun in a valid config: worth a line, not a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Dotted key path.
    pub key: String,
    /// 1-based line of the key, when known.
    pub line: Option<usize>,
    /// What and why.
    pub message: String,
}

/// A parsed, validated config.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The spec.
    pub spec: Spec,
    /// Footguns.
    pub warnings: Vec<Warning>,
}

/// The most a `binky.toml` read takes: a config is a small text file, and `binky check
/// /dev/zero` must not read until memory runs out.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Why a config file cannot be read as text.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The OS refused (missing, a directory, no permission).
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// Larger than [`MAX_CONFIG_BYTES`].
    #[error("it is larger than {} KiB, which no binky.toml is; is this the right file?", MAX_CONFIG_BYTES / 1024)]
    TooLarge,
    /// Not UTF-8.
    #[error("it is not UTF-8 text: byte 0x{byte:02x} at line {line}, column {column} does not start a character; save the file as UTF-8")]
    NotUtf8 {
        /// The first bad byte.
        byte: u8,
        /// Its line (1-based).
        line: usize,
        /// Its column in bytes (1-based).
        column: usize,
    },
}

/// Read a config file as text: at most [`MAX_CONFIG_BYTES`], and only valid UTF-8 (a
/// lossy read would run a config other than the one on disk).
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)?;
    text_of(bytes)
}

/// The text of a config held in `bytes` (a file, or `git show` of a committed one), with
/// the same limits as [`read_text`].
pub fn text_of(bytes: Vec<u8>) -> Result<String, ReadError> {
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = &bytes[..at];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let column = at
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        ReadError::NotUtf8 {
            byte: bytes[at],
            line,
            column,
        }
    })
}

/// Read and validate a `binky.toml` file.
pub fn load(path: &Path) -> Result<Loaded, ConfigErrors> {
    let text = read_text(path).map_err(|e| {
        ConfigErrors(vec![ConfigError {
            file: path.to_owned(),
            position: None,
            key: String::new(),
            message: e.to_string(),
            fix: matches!(e, ReadError::Io(_)).then(|| {
                "run binky in a directory that has a binky.toml (or one of its parents does)".into()
            }),
        }])
    })?;
    parse(&text, path)
}

/// Validate the text of a `binky.toml` (`file` is only used in messages).
pub fn parse(text: &str, file: &Path) -> Result<Loaded, ConfigErrors> {
    let mut cx = Cx {
        file,
        text,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => {
            let pos = e.span().map(|s| cx.position(s.start));
            return Err(ConfigErrors(vec![ConfigError {
                file: file.to_owned(),
                position: pos,
                key: String::new(),
                message: format!("not valid TOML: {}", e.message().trim()),
                fix: Some("fix the syntax at that position".into()),
            }]));
        }
    };
    let spec = cx.root(root.get_ref(), root.span());
    match spec {
        Some(spec) if cx.errors.is_empty() => Ok(Loaded {
            spec,
            warnings: cx.warnings,
        }),
        _ => {
            if cx.errors.is_empty() {
                cx.errors.push(ConfigError {
                    file: file.to_owned(),
                    position: None,
                    key: String::new(),
                    message: "invalid".into(),
                    fix: None,
                });
            }
            cx.errors
                .sort_by_key(|e| e.position.unwrap_or((usize::MAX, 0)));
            Err(ConfigErrors(cx.errors))
        }
    }
}

type Table<'i> = DeTable<'i>;
type Value<'i> = Spanned<DeValue<'i>>;

/// The reader of one file: its text (for positions) and what it found so far.
struct Cx<'a> {
    file: &'a Path,
    text: &'a str,
    errors: Vec<ConfigError>,
    warnings: Vec<Warning>,
}

/// The tables of a `binky.toml`.
const ROOT_KEYS: &[&str] = &[
    "project", "defaults", "services", "groups", "agents", "hooks",
];

impl Cx<'_> {
    /// The whole file: each table in turn, then the checks across them.
    fn root(&mut self, root: &Table<'_>, span: Range<usize>) -> Option<Spec> {
        self.unknown_keys(root, "", ROOT_KEYS);
        let project = self.project_table(root, span);
        let defaults = self.defaults(root);

        let mut dep_spans = DepSpans::new();
        // Every service the file declares, valid or not: a reference to one that has its
        // own error is not also an "unknown service".
        // `preserve_order` keeps the file's order: the first URL service is the world's
        // own host.
        let declared_order: Vec<String> = Self::get(root, "services")
            .and_then(|v| match v.get_ref() {
                DeValue::Table(t) => Some(t.iter().map(|(k, _)| k.get_ref().to_string()).collect()),
                _ => None,
            })
            .unwrap_or_default();
        let declared: BTreeSet<String> = declared_order.iter().cloned().collect();
        let services = self.services(root, &defaults, &mut dep_spans);
        self.depends_on(&dep_spans, &declared);
        let groups = self.groups(root, &services, &declared);
        let agents = self.agents(root, &declared);
        let hooks = self.hooks(root);

        let order = declared_order
            .into_iter()
            .filter(|n| services.contains_key(n))
            .collect();
        let spec = Spec {
            project: project?,
            services,
            groups,
            agents,
            hooks,
            order,
        };
        self.dependency_cycle(&spec, &dep_spans);
        self.footguns(&spec, root);
        Some(spec)
    }
}

#[cfg(test)]
mod tests;
