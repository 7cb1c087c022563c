//! Writing the env a service gets: its compose environment (and the env files it loads)
//! with addresses of compose services as binky's tokens and credentials as references.

use std::collections::BTreeSet;

use serde_yaml_ng::Mapping;

use super::{EnvLine, Writer};
use crate::init::plan::{Kind, SvcId};
use crate::init::secrets::{literal_part, looks_secret, secret_name};
use crate::init::toml_out::q;
use crate::init::values::{
    env_entries, env_reference, family_field, host_key_prefix, normalise, single_reference,
    string_list_env_file, Dir,
};

impl Writer {
    /// The lines of service `i`'s `[services.X.env]`: its compose environment, the entries
    /// of the env files it loads that binky must override, and `DATABASE_URL` when its
    /// settings read it but compose gives the database in parts.
    pub(in crate::init) fn env_lines(&mut self, i: SvcId) -> Vec<EnvLine> {
        let def = self.plan.svcs[i].def.clone();
        let entries = env_entries(&def);
        let families = self.compose_families(&entries);
        let keys: BTreeSet<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        let mut lines: Vec<EnvLine> = entries
            .into_iter()
            .map(|(k, raw)| self.compose_line(i, k, raw, &families))
            .collect();
        // compose hands `.env` (or another env_file) to the service: its addresses of
        // compose services are pointed at binky's (`REDIS_URL=redis://redis:6379/0`), the rest
        // binky loads from the file as it is.
        let from_files = self.env_file_entries(i, &def);
        // An address in parts in a file (`POSTGRES_HOST=postgres`).
        let mut file_families: Vec<(String, SvcId)> = Vec::new();
        for (_, k, v) in &from_files {
            if let Some(prefix) = host_key_prefix(k) {
                if let Some(&j) = self.plan.alias.get(&v.trim().to_ascii_lowercase()) {
                    file_families.push((prefix, j));
                }
            }
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (file, k, val) in from_files {
            if keys.contains(&k) || !seen.insert(k.clone()) {
                continue;
            }
            lines.extend(self.file_line(i, &file, k, val, &file_families));
        }
        let has_url =
            lines.iter().any(|l| l.key == "DATABASE_URL") || seen.contains("DATABASE_URL");
        if !has_url {
            lines.extend(self.database_url_line(i, &families, &file_families));
        }
        lines
    }

    /// Addresses in parts in the compose environment: `DB_HOST: db` makes DB_PORT,
    /// DB_USER, DB_PASSWORD and DB_NAME the slice's too; `EMAIL_HOST: mailpit` makes
    /// EMAIL_PORT its port. Each is its key's prefix and the service it names.
    fn compose_families(&mut self, entries: &[(String, Option<String>)]) -> Vec<(String, SvcId)> {
        let mut families = Vec::new();
        for (k, v) in entries {
            let (Some(v), Some(prefix)) = (v, host_key_prefix(k)) else {
                continue;
            };
            let v = self.plan.interpolate(v);
            if let Some(&j) = self.plan.alias.get(&v.trim().to_ascii_lowercase()) {
                families.push((prefix, j));
            }
        }
        families
    }

    /// The line of compose env `k` of service `i` (`raw`: its value, none when inherited):
    /// a member of an address in parts, a credential left out, or the value with its
    /// addresses as binky's.
    fn compose_line(
        &mut self,
        i: SvcId,
        k: String,
        raw: Option<String>,
        families: &[(String, SvcId)],
    ) -> EnvLine {
        let Some(raw) = raw else {
            return EnvLine {
                key: k.clone(),
                value: None,
                comment: Some(format!("{k}: inherited from the environment of `binky up`")),
            };
        };
        let iv = self.plan.interpolate(&raw);
        if let Some(line) = self.family_line(&k, &iv, families, None) {
            return line;
        }
        let v = self.mapped_value(i, &k, &iv);
        let once = self.once_uncommented(i, &k, &iv);
        let secret = (secret_name(&k) && !literal_part(&v).trim().is_empty())
            || looks_secret(&v)
            || self
                .plan
                .secrets
                .iter()
                .any(|(s, _)| v.contains(s.as_str()));
        if secret {
            let var = single_reference(&raw).unwrap_or_else(|| k.clone());
            let from_dotenv = if self.plan.vars.contains_key(&var) {
                " (.env has it)"
            } else {
                ""
            };
            self.plan.reason(
                &var,
                format!("a credential: not copied into binky.toml{from_dotenv}"),
            );
            return EnvLine {
                value: Some(format!("${{env.{var}}}")),
                comment: Some(format!("{k} looked like a credential: not copied; set {var} in the environment of `binky up` (or an env_file)")),
                key: k,
            };
        }
        // `JWT_SECRET: ${JWT_SECRET}` is a reference already: say what to set.
        let comment = env_reference(&v)
            .filter(|_| secret_name(&k))
            .map(|var| {
                format!(
                    "{k} is a credential: set {var} in the environment of `binky up` (or an env_file){}",
                    if self.plan.vars.contains_key(var) { "; .env has it" } else { "" }
                )
            });
        let anywhere = k.to_ascii_uppercase().contains("PORT");
        let v = self.self_ports(i, &v, anywhere);
        if let Some(line) = allowed_hosts(&k, &v, "compose") {
            return line;
        }
        let comment = match (comment, once.is_empty()) {
            (c, true) => c,
            (Some(c), false) => Some(format!("{c}{once}")),
            (None, false) => Some(format!("{k}: points at a commented-out service{once}")),
        };
        EnvLine {
            key: k,
            value: Some(v),
            comment,
        }
    }

    /// What the env files compose hands service `i` hold, as `(file, key, value)`: `.env`
    /// when it loads it, then its other `env_file`s.
    fn env_file_entries(&self, i: SvcId, def: &Mapping) -> Vec<(String, String, String)> {
        let mut from_files: Vec<(String, String, String)> = Vec::new();
        if self.plan.loads_dotenv(i) {
            for (k, v) in self.plan.found.dotenv.clone() {
                from_files.push((".env".into(), k, v));
            }
        }
        for f in string_list_env_file(def) {
            if normalise(&f) == Dir::Below(".env".into()) {
                continue;
            }
            if let Some(vars) = self.plan.found.env_files.get(&f) {
                for (k, v) in vars.clone() {
                    from_files.push((f.clone(), k, v));
                }
            }
        }
        from_files
    }

    /// The line of `k` of env file `file` for service `i`, when binky must override it: a
    /// member of an address in parts, allowed hosts, or an address of a compose service.
    fn file_line(
        &mut self,
        i: SvcId,
        file: &str,
        k: String,
        val: String,
        file_families: &[(String, SvcId)],
    ) -> Option<EnvLine> {
        let why = format!("{k}: {file} points at a compose service; this overrides it");
        if let Some(line) = self.family_line(&k, &val, file_families, Some(why)) {
            return Some(line);
        }
        if let Some(line) = allowed_hosts(&k, &val, file) {
            return Some(line);
        }
        let v = self.mapped_value(i, &k, &val);
        if v != val
            && !looks_secret(&v)
            && !self
                .plan
                .secrets
                .iter()
                .any(|(s, _)| v.contains(s.as_str()))
        {
            let once = self.once_uncommented(i, &k, &val);
            return Some(EnvLine {
                comment: Some(format!(
                    "{k}: {file} points at a compose service; this overrides it{once}"
                )),
                key: k,
                value: Some(v),
            });
        }
        None
    }

    /// Settings in parts (`POSTGRES_HOST`, …) in front of code that reads DATABASE_URL (an
    /// image's entrypoint builds it from them): binky sets it, as the slice's URL, for a
    /// service `i` that does not set it already.
    fn database_url_line(
        &self,
        i: SvcId,
        families: &[(String, SvcId)],
        file_families: &[(String, SvcId)],
    ) -> Option<EnvLine> {
        let j = families
            .iter()
            .chain(file_families)
            .map(|(_, j)| *j)
            .find(|&j| {
                matches!(
                    self.plan.svcs[j].kind,
                    Kind::Adapter("postgres" | "mysql" | "mariadb" | "percona")
                )
            })?;
        let path = self
            .plan
            .found
            .django
            .database_url_reader(self.plan.svcs[i].workdir.as_deref())?;
        let target = self.plan.svcs[j].name.clone();
        Some(EnvLine {
            comment: Some(format!("DATABASE_URL: {path} reads it; compose gives the database in parts (its image builds the URL from them)")),
            key: "DATABASE_URL".into(),
            value: Some(format!("${{{target}.url}}")),
        })
    }

    /// `value` of env `key` of service `i` with its addresses of compose services as
    /// binky's; an address of a commented-out service is `localhost` with the same port,
    /// and [`Writer::commented_refs`] names the service.
    fn mapped_value(&mut self, i: SvcId, key: &str, value: &str) -> String {
        self.commented_refs.clear();
        self.map_addresses(i, Some(key), value)
    }

    /// After [`Writer::mapped_value`]: `; once X is uncommented: KEY = "<tokens>"` when the
    /// value named a commented-out service, else nothing.
    fn once_uncommented(&mut self, i: SvcId, key: &str, value: &str) -> String {
        if self.commented_refs.is_empty() {
            return String::new();
        }
        let names = self.commented_refs.join(", ");
        self.as_if_running = true;
        let v = self.map_addresses(i, Some(key), value);
        self.as_if_running = false;
        self.commented_refs.clear();
        format!("; once {names} is uncommented: {key} = {}", q(&v))
    }

    /// A member of an address in parts (`DB_PORT` of `DB_HOST: db`) as the target's
    /// token: an adapter's `${db.port}`, `${db.user}`, …; a process's port
    /// (`${mailpit.smtp}`) and `localhost`. `None`: not a member, or nothing to change.
    fn family_line(
        &mut self,
        key: &str,
        value: &str,
        families: &[(String, SvcId)],
        why: Option<String>,
    ) -> Option<EnvLine> {
        let (field, j) = family_field(key, families)?;
        let target = self.plan.svcs[j].name.clone();
        let commented = matches!(self.plan.svcs[j].kind, Kind::Commented(_));
        let token = match (self.plan.svcs[j].kind, field) {
            (Kind::Adapter(a), _) if adapter_has_parts(a) => format!("${{{target}.{field}}}"),
            (Kind::Process | Kind::Commented(_), "host") => "localhost".to_owned(),
            (Kind::Process | Kind::Commented(_), "port") => {
                let p: u16 = value.trim().parse().ok()?;
                self.plan.layouts[j]
                    .token(&target, p)
                    .unwrap_or_else(|| format!("${{{target}.port}}"))
            }
            _ => return None,
        };
        let (value, comment) = if commented && field == "port" {
            let once = format!("once {target} is uncommented: {key} = {}", q(&token));
            (
                value.trim().to_owned(),
                Some(match why {
                    Some(w) => format!("{w}; {once}"),
                    None => once,
                }),
            )
        } else {
            (token, why)
        };
        Some(EnvLine {
            key: key.to_owned(),
            value: Some(value),
            comment,
        })
    }
}

/// Adapters whose slices have `host`, `port`, `user`, `password` and `database` tokens.
fn adapter_has_parts(adapter: &str) -> bool {
    matches!(
        adapter,
        "postgres" | "mysql" | "mariadb" | "percona" | "redis" | "valkey"
    )
}

/// A framework's list of the hosts it answers (Django's `ALLOWED_HOSTS`, as
/// `DJANGO_ALLOWED_HOSTS` or `ALLOWED_HOSTS`, comma-separated) with binky's proxy hosts
/// (`web.<world>.<project>.localhost`) added, or `None` for any other variable.
pub(in crate::init) fn allowed_hosts(key: &str, value: &str, from: &str) -> Option<EnvLine> {
    let k = key.to_ascii_uppercase();
    if !(k == "ALLOWED_HOSTS" || k.ends_with("_ALLOWED_HOSTS")) {
        return None;
    }
    let v = value.trim();
    if v == "*" || v.split(',').any(|h| h.trim() == ".localhost") {
        return None;
    }
    let joined = if v.is_empty() {
        ".localhost,127.0.0.1".to_owned()
    } else {
        format!("{v},.localhost")
    };
    Some(EnvLine {
        key: key.to_owned(),
        value: Some(joined),
        comment: Some(format!(
            "{key}: as {from} has it, and .localhost: the proxy sends Host: <service>.<world>.<project>.localhost"
        )),
    })
}
