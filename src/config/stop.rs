//! How a process service stops: `stop_signal` and `stop_grace_period` (compose's names) and
//! `stop_after_dependents`, on a service or in `[defaults]`.

use binky_controllers::spec::Stopping;

use super::cx::join;
use super::{parse_duration, Cx, Table};

/// A signal's name as `stop_signal` takes it (`SIGQUIT`, `QUIT`, `quit`), in its one form
/// (`SIGQUIT`); the message says why not.
pub fn parse_signal(text: &str) -> Result<String, String> {
    match binky_platform::signal::canonical(text) {
        Some(name) => Ok(name.to_owned()),
        None if text.trim().parse::<i32>().is_ok() => Err(format!(
            "`{text}` is a signal's number: binky takes its name, the same on every system"
        )),
        None => Err(format!("`{text}` is not a signal's name")),
    }
}

/// Every name `stop_signal` takes, for the fix of a wrong one.
fn signal_names() -> String {
    binky_platform::signal::NAMES.join(", ")
}

impl Cx<'_> {
    /// The stop keys of `t` at `path`, each one `base` (the `[defaults]`) does not set
    /// falling back to it.
    pub(super) fn stopping(&mut self, t: &Table<'_>, path: &str, base: &Stopping) -> Stopping {
        let signal = self.stop_key(t, path, "stop_signal", &base.signal, parse_signal, || {
            format!(
                "write a signal's name, with or without SIG: stop_signal = \"SIGQUIT\" or \"QUIT\" (SIGTERM when unset); the names: {}",
                signal_names()
            )
        });
        let grace_ms = self.stop_key(
            t,
            path,
            "stop_grace_period",
            &base.grace_ms,
            |text| parse_duration(text).map(|d| d.as_millis() as u64),
            || "e.g. stop_grace_period = \"3s\" (ms, s, m, h): how long it may take to stop before it is killed (5 s when unset)".to_owned(),
        );
        let after_dependents = self
            .boolean(t, path, "stop_after_dependents")
            .unwrap_or(base.after_dependents);
        Stopping {
            signal,
            grace_ms,
            after_dependents,
        }
    }

    /// One stop key of `t`, written as a string or a number (`stop_signal = 3` is read as
    /// its text and refused by `parse` with the fix): unset or wrong, `base`'s value.
    fn stop_key<T: Clone>(
        &mut self,
        t: &Table<'_>,
        path: &str,
        key: &str,
        base: &Option<T>,
        parse: impl FnOnce(&str) -> Result<T, String>,
        fix: impl FnOnce() -> String,
    ) -> Option<T> {
        let Some(v) = Self::get(t, key) else {
            return base.clone();
        };
        let key = join(path, key);
        match self.text_or_number(v, &key).as_deref().map(parse) {
            Some(Ok(value)) => Some(value),
            Some(Err(e)) => {
                self.error(v.span(), &key, e, Some(fix()));
                base.clone()
            }
            None => base.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_taken_by_its_name_with_or_without_sig_in_any_case() {
        for text in ["SIGQUIT", "QUIT", "quit", " SigQuit "] {
            assert_eq!(parse_signal(text).unwrap(), "SIGQUIT", "{text}");
        }
        assert_eq!(parse_signal("INT").unwrap(), "SIGINT");
        assert_eq!(
            parse_signal("SIGQUITT").unwrap_err(),
            "`SIGQUITT` is not a signal's name"
        );
        assert!(parse_signal("3").unwrap_err().contains("number"));
        assert!(parse_signal("").is_err());
    }
}
