//! The reader's tools: where an offset is, how an error or a warning is recorded, unknown
//! keys with a "did you mean", and the typed reads (string, boolean, integer, lists, maps)
//! every table's reader builds on.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::de::DeValue;

use super::{ConfigError, Cx, Table, Value, Warning};

pub(super) fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Edit distance, for "did you mean".
/// The edit distance between `a` and `b` (insertions, deletions, substitutions).
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The one of `valid` nearest to `key`, when it is near enough to be what was meant (at
/// most two edits, and fewer than its length).
pub fn suggest<'k>(key: &str, valid: &[&'k str]) -> Option<&'k str> {
    valid
        .iter()
        .map(|v| (distance(key, v), *v))
        .filter(|(d, v)| *d <= 2 && *d < v.len())
        .min()
        .map(|(_, v)| v)
}

impl Cx<'_> {
    pub(super) fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }

    pub(super) fn error(
        &mut self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
        fix: impl Into<Option<String>>,
    ) {
        let position = Some(self.position(span.start));
        self.errors.push(ConfigError {
            file: self.file.to_owned(),
            position,
            key: key.to_owned(),
            message: message.into(),
            fix: fix.into(),
        });
    }

    /// The error of a value of the wrong type: "expected `expected`, found …"; always
    /// none, for the read that refuses it.
    pub(super) fn wrong_type<T>(
        &mut self,
        v: &Value<'_>,
        path: &str,
        expected: &str,
        fix: impl Into<Option<String>>,
    ) -> Option<T> {
        let found = type_name(v.get_ref());
        self.error(
            v.span(),
            path,
            format!("expected {expected}, found {found}"),
            fix,
        );
        None
    }

    /// An error on `key` of `table` (`path`): at where the key is written, else at `or`.
    pub(super) fn key_error(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
        or: Range<usize>,
        message: impl Into<String>,
        fix: impl Into<Option<String>>,
    ) {
        let span = Self::span_of(table, key, or);
        self.error(span, &join(path, key), message, fix);
    }

    pub(super) fn warn(&mut self, key: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            key: key.to_owned(),
            line: None,
            message: message.into(),
        });
    }

    /// A warning about the key at `span`.
    pub(super) fn warn_at(&mut self, span: Range<usize>, key: &str, message: impl Into<String>) {
        let line = Some(self.position(span.start).0);
        self.warnings.push(Warning {
            key: key.to_owned(),
            line,
            message: message.into(),
        });
    }

    /// Report keys of `table` that are not in `valid`.
    pub(super) fn unknown_keys(&mut self, table: &Table<'_>, path: &str, valid: &[&str]) {
        for (k, _) in table.iter() {
            if !valid.contains(&k.get_ref().as_ref()) {
                let key = k.get_ref().as_ref();
                let fix = match suggest(key, valid) {
                    Some(s) => format!(
                        "did you mean `{s}`? (valid keys here: {})",
                        valid.join(", ")
                    ),
                    None => format!("remove it; valid keys here: {}", valid.join(", ")),
                };
                let table_name = if path.is_empty() {
                    "the top level".to_owned()
                } else {
                    format!("[{path}]")
                };
                self.error(
                    k.span(),
                    &join(path, key),
                    format!("unknown key in {table_name}"),
                    fix,
                );
            }
        }
    }

    pub(super) fn get<'t, 'i>(table: &'t Table<'i>, key: &str) -> Option<&'t Value<'i>> {
        table.get(key)
    }

    /// Where `key` of `table` is written, else `or`.
    pub(super) fn span_of(table: &Table<'_>, key: &str, or: Range<usize>) -> Range<usize> {
        Self::get(table, key).map_or(or, |v| v.span())
    }

    pub(super) fn expect_table<'t, 'i>(
        &mut self,
        v: &'t Value<'i>,
        path: &str,
    ) -> Option<&'t Table<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => self.wrong_type(
                v,
                path,
                "a table",
                format!("write it as [{path}] with keys under it"),
            ),
        }
    }

    pub(super) fn string(&mut self, table: &Table<'_>, path: &str, key: &str) -> Option<String> {
        let v = Self::get(table, key)?;
        self.string_value(v, &join(path, key))
    }

    pub(super) fn string_value(&mut self, v: &Value<'_>, path: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            other => {
                let fix = match other {
                    DeValue::Integer(_) => Some(format!(
                        "quote it: \"{}\"",
                        self.text.get(v.span()).unwrap_or("").trim()
                    )),
                    DeValue::Boolean(b) => Some(format!("quote it: \"{b}\"")),
                    _ => None,
                };
                self.wrong_type(v, path, "a string", fix)
            }
        }
    }

    /// A value written as a string or as a number (`stop_signal = 3`, `timeout = 30`), as
    /// its text: the parser that reads it says what a number means there.
    pub(super) fn text_or_number(&mut self, v: &Value<'_>, path: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::Integer(i) => Some(i.as_str().to_owned()),
            _ => self.string_value(v, path),
        }
    }

    pub(super) fn non_empty_string(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
    ) -> Option<String> {
        let s = self.string(table, path, key)?;
        if s.trim().is_empty() {
            self.key_error(table, path, key, 0..0, "must not be empty", None);
            return None;
        }
        Some(s)
    }

    pub(super) fn boolean(&mut self, table: &Table<'_>, path: &str, key: &str) -> Option<bool> {
        let v = Self::get(table, key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => self.wrong_type(v, &join(path, key), "true or false", None),
        }
    }

    pub(super) fn integer(&mut self, v: &Value<'_>, path: &str) -> Option<i64> {
        match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.error(v.span(), path, "integer out of range", None);
                    None
                }
            },
            _ => self.wrong_type(v, path, "an integer", None),
        }
    }

    /// Like [`Cx::string_list`], without the places.
    pub(super) fn strings(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
        allow_single: bool,
    ) -> Option<Vec<String>> {
        self.string_list(table, path, key, allow_single)
            .map(|items| items.into_iter().map(|(s, _)| s).collect())
    }

    pub(super) fn string_list(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
        allow_single: bool,
    ) -> Option<Vec<(String, Range<usize>)>> {
        let v = Self::get(table, key)?;
        let path = join(path, key);
        match v.get_ref() {
            DeValue::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    if let Some(s) = self.string_value(item, &format!("{path}[{i}]")) {
                        out.push((s, item.span()));
                    }
                }
                Some(out)
            }
            DeValue::String(s) if allow_single => Some(vec![(s.to_string(), v.span())]),
            _ => self.wrong_type(
                v,
                &path,
                "a list of strings",
                format!("write it as {key} = [\"…\"]"),
            ),
        }
    }

    pub(super) fn string_map(
        &mut self,
        table: &Table<'_>,
        path: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let v = Self::get(table, key)?;
        let path = join(path, key);
        let t = self.expect_table(v, &path)?;
        let mut out = BTreeMap::new();
        for (k, val) in t.iter() {
            if let Some(s) = self.string_value(val, &join(&path, k.get_ref())) {
                out.insert(k.get_ref().to_string(), s);
            }
        }
        Some(out)
    }
}
