//! Merging: compose's `${VAR}` interpolation understood through `.env`, and the
//! credentials compose and `.env` hold, kept out of every text the file carries.

use std::collections::BTreeSet;

use super::{Plan, TRACKED_DOTENV};
use crate::init::secrets::{
    looks_secret, placeholder, random_looking, secret_name, token_shaped, url_password,
    worth_hunting,
};
use crate::init::values::{env_entries, matching_brace};

impl Plan {
    /// Remember every credential compose and `.env` hold, so that no text copied into the
    /// file (a command, a health check) can carry one.
    pub(in crate::init) fn learn_secrets(&mut self) {
        let mut found: Vec<(String, String)> = Vec::new();
        let mut learn = |name: &str, value: &str| {
            if worth_hunting(value) {
                found.push((value.to_owned(), name.to_owned()));
            }
            if let Some((a, b)) = url_password(value) {
                if worth_hunting(&value[a..b]) {
                    found.push((value[a..b].to_owned(), format!("{name}_PASSWORD")));
                }
            }
        };
        // A tracked `.env` is the repository's own: its values are committed for everyone,
        // and hunting them would turn the defaults written from it back into references.
        let dotenv: &[(String, String)] = if self.found.dotenv_tracked {
            &[]
        } else {
            &self.found.dotenv
        };
        for (k, v) in dotenv {
            if secret_name(k) || looks_secret(v) {
                learn(k, v);
            }
        }
        for svc in &self.svcs {
            for (k, v) in env_entries(&svc.def) {
                if let Some(v) = v {
                    if !v.contains('$') && (secret_name(&k) || looks_secret(&v)) {
                        learn(&k, &v);
                    }
                }
            }
        }
        // Not a value that is also a name the file needs (a password `shop` in project
        // `shop`, service `shop`): hunting it would break the file, and it guards nothing.
        let names: BTreeSet<String> = self
            .svcs
            .iter()
            .flat_map(|s| [s.name.to_ascii_lowercase(), s.raw.to_ascii_lowercase()])
            .chain([self.project.clone()])
            .collect();
        found.retain(|(v, _)| !names.contains(&v.to_ascii_lowercase()));
        found.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.cmp(b)));
        found.dedup_by(|a, b| a.0 == b.0);
        self.secrets = found;
    }

    /// Compose's `${VAR}`, `${VAR:-default}`, `$VAR` and `$$`, understood through `.env`:
    /// a known, harmless value is written as it is; a credential, or a variable `.env` does
    /// not set, becomes `${env.VAR}`.
    pub(in crate::init) fn interpolate(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            if let Some(a) = after.strip_prefix('$') {
                out.push('$');
                rest = a;
            } else if let Some(inner) = after.strip_prefix('{') {
                match matching_brace(inner) {
                    Some(end) => {
                        let expanded = self.expand(&inner[..end]);
                        out.push_str(&expanded);
                        rest = &inner[end + 1..];
                    }
                    None => {
                        out.push('$');
                        rest = after;
                    }
                }
            } else {
                let n = after
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                if n > 0 && !after.as_bytes()[0].is_ascii_digit() {
                    let name = &after[..n];
                    let value = self.vars.get(name).cloned();
                    out.push_str(&self.var_value(name, value));
                    rest = &after[n..];
                } else {
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// One `${…}` of compose (`inner` is what is between the braces), with its `:-`, `-`,
    /// `:+` and `+` forms.
    pub(in crate::init) fn expand(&mut self, inner: &str) -> String {
        let n = inner
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let (name, op) = inner.split_at(n);
        if name.is_empty() {
            return format!("${{{inner}}}");
        }
        let set = self.vars.get(name).cloned();
        // An optional credential (`${SENTRY_DSN:-}`): not copied, and optional it stays.
        let default_op = op
            .strip_prefix(":-")
            .map(|d| (":-", d))
            .or_else(|| op.strip_prefix('-').map(|d| ("-", d)));
        if let Some((sep, d)) = default_op {
            let secretish = secret_name(name) || set.as_deref().is_some_and(looks_secret);
            // A credential keeps compose's default when it is empty (optional) or a
            // development placeholder (`devkey`, `changethis`): compose already commits it,
            // and `binky check` accepts `${env.NAME:-placeholder}`. A default that looks
            // like a real credential is not copied.
            if secretish {
                let d = self.interpolate(d);
                if d.is_empty() {
                    self.reason(
                        name,
                        "optional (compose gives a default): set it in the environment of `binky up` to use it",
                    );
                    return format!("${{env.{name}{sep}{d}}}");
                }
                if placeholder(&d) && !self.secrets.iter().any(|(s, _)| *s == d) {
                    self.reason(
                        name,
                        format!("a credential with compose's development default `{d}`: set it in the environment of `binky up` for anything but development"),
                    );
                    return format!("${{env.{name}{sep}{d}}}");
                }
            }
        }
        let value = if let Some(d) = op.strip_prefix(":-") {
            match set {
                Some(v) if !v.is_empty() => Some(v),
                _ => Some(self.interpolate(d)),
            }
        } else if let Some(d) = op.strip_prefix('-') {
            match set {
                Some(v) => Some(v),
                None => Some(self.interpolate(d)),
            }
        } else if let Some(alt) = op.strip_prefix(":+") {
            return match set {
                Some(v) if !v.is_empty() => self.interpolate(alt),
                _ => String::new(),
            };
        } else if let Some(alt) = op.strip_prefix('+') {
            return match set {
                Some(_) => self.interpolate(alt),
                None => String::new(),
            };
        } else {
            set
        };
        self.var_value(name, value)
    }

    /// Variable `name`'s value as written in the file: as it is when known and harmless,
    /// else `${env.NAME}` (with why).
    pub(in crate::init) fn var_value(&mut self, name: &str, value: Option<String>) -> String {
        let secret = secret_name(name)
            || value.as_deref().is_some_and(|v| {
                v.contains("-----BEGIN")
                    || random_looking(v)
                    || v.split_whitespace().any(token_shaped)
            });
        match value {
            Some(v) if !secret => v,
            Some(v) if self.tracked_default(name, &v) => {
                self.reason(
                    name,
                    format!("{TRACKED_DOTENV}: its value there is the default; set it in the environment of `binky up` to use another"),
                );
                format!("${{env.{name}:-{v}}}")
            }
            _ => {
                if secret {
                    let why = if self.vars.contains_key(name) {
                        "a credential: not copied into binky.toml (.env has it)"
                    } else {
                        "a credential: not copied into binky.toml"
                    };
                    self.reason(name, why);
                } else {
                    self.reason(
                        name,
                        "compose reads it from the environment; .env does not set it",
                    );
                }
                format!("${{env.{name}}}")
            }
        }
    }

    /// Is `value` of credential `name` the repository's tracked `.env`'s, and writable as
    /// the default of `${env.NAME:-value}`? The file is committed, so its value is the
    /// project's development setting, not a secret of this machine (compose reads it from
    /// there; without a default, `binky up` would refuse to start until someone copies it
    /// into the environment). A value shaped like a real token or key is still not
    /// copied: the repository may have committed it by mistake.
    fn tracked_default(&self, name: &str, value: &str) -> bool {
        self.found.dotenv_tracked
            && !value.is_empty()
            && self.vars.get(name).map(String::as_str) == Some(value)
            && !value.contains(['$', '{', '}', '"', '\\', '\n'])
            && !value.contains("-----BEGIN")
            && !value.split_whitespace().any(token_shaped)
    }

    /// Replace every credential in free text (a command, a health check, a note) with an
    /// `${env.…}` reference.
    pub(in crate::init) fn redact(&mut self, owner: &str, text: &str) -> String {
        let mut out = text.to_owned();
        let secrets = self.secrets.clone();
        for (value, name) in &secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("${{env.{name}}}"));
                self.reason(name, "a credential: not copied into binky.toml");
            }
        }
        let base = owner.to_ascii_uppercase().replace('-', "_");
        while let Some((a, b)) = url_password(&out) {
            let name = format!("{base}_PASSWORD");
            out.replace_range(a..b, &format!("${{env.{name}}}"));
            self.reason(
                &name,
                format!("a password compose wrote into {owner}'s settings"),
            );
        }
        let words: Vec<String> = out
            .split(|c: char| c.is_whitespace() || "\"',;=".contains(c))
            .filter(|w| token_shaped(w))
            .map(str::to_owned)
            .collect();
        for w in words {
            let name = format!("{base}_TOKEN");
            out = out.replace(&w, &format!("${{env.{name}}}"));
            self.reason(
                &name,
                format!("a token compose wrote into {owner}'s settings"),
            );
        }
        // `--password X`, `--api-key=X`, `DB_PASSWORD=X cmd`: the value goes.
        let spans: Vec<(usize, usize)> = out
            .char_indices()
            .filter(|&(i, c)| {
                !c.is_whitespace() && (i == 0 || out[..i].ends_with(char::is_whitespace))
            })
            .map(|(i, _)| {
                let len = out[i..].find(char::is_whitespace).unwrap_or(out.len() - i);
                (i, i + len)
            })
            .collect();
        let mut edits: Vec<(usize, usize, String)> = Vec::new();
        for (n, &(a, b)) in spans.iter().enumerate() {
            let word = out[a..b].trim_matches(|c| c == '"' || c == '\'');
            // The word without its quotes, in `out`.
            let a = a + out[a..b].find(word).unwrap_or(0);
            let b = a + word.len();
            let flag = word.strip_prefix("--").or_else(|| {
                word.strip_prefix('-')
                    .filter(|w| w.len() > 1 && !w.starts_with('-'))
            });
            let (name, inline) = match word.split_once('=') {
                Some((k, v)) => (k.trim_start_matches('-'), Some(v)),
                None => (flag.unwrap_or(""), None),
            };
            let is_assignment = flag.is_none()
                && inline.is_some()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let upper = name.to_ascii_uppercase().replace('-', "_");
            // `--no-password` takes no value; `--password-file PATH` names a file.
            if name.is_empty()
                || !secret_name(&upper)
                || upper.starts_with("NO_")
                || upper.ends_with("_FILE")
            {
                continue;
            }
            if flag.is_none() && !is_assignment {
                continue;
            }
            let var = if is_assignment {
                upper
            } else {
                format!("{base}_{upper}")
            };
            let target = match inline {
                Some(v) if !v.is_empty() && !v.starts_with("${") => {
                    let start = a + out[a..b].find('=').map_or(0, |e| e + 1);
                    Some((start, b))
                }
                Some(_) => None,
                None => spans.get(n + 1).and_then(|&(c, d)| {
                    let next = out[c..d].trim_matches(|q| q == '"' || q == '\'');
                    if next.is_empty() || next.starts_with('-') || next.starts_with("${") {
                        return None;
                    }
                    let c = c + out[c..d].find(next).unwrap_or(0);
                    Some((c, c + next.len()))
                }),
            };
            if let Some((c, d)) = target.filter(|&(c, _)| edits.last().is_none_or(|e| e.1 <= c)) {
                edits.push((c, d, format!("${{env.{var}}}")));
                self.reason(
                    &var,
                    format!("a credential compose wrote into {owner}'s settings"),
                );
            }
        }
        for (c, d, r) in edits.into_iter().rev() {
            out.replace_range(c..d, &r);
        }
        out
    }
}
