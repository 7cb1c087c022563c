//! The env a service gets in binky.toml: its compose environment with addresses rewritten to binky's tokens.

use super::*;

impl Init {
    pub(super) fn env_lines(&mut self, i: usize) -> Vec<EnvLine> {
        let def = self.svcs[i].def.clone();
        let entries = env_entries(&def);
        // PostgreSQL's address in parts: `DB_HOST: db` makes DB_PORT, DB_USER, DB_PASSWORD
        // and DB_NAME the slice's too.
        let mut families: Vec<(String, String)> = Vec::new();
        for (k, v) in &entries {
            let Some(v) = v else { continue };
            let upper = k.to_ascii_uppercase();
            let Some(prefix) = upper.strip_suffix("HOST") else {
                continue;
            };
            if prefix.trim_end_matches('_').is_empty() {
                continue;
            }
            let v = self.interpolate(v);
            if let Some(&j) = self.alias.get(&v.trim().to_ascii_lowercase()) {
                if self.svcs[j].kind == Kind::Adapter("postgres") {
                    families.push((
                        prefix.trim_end_matches('_').to_owned(),
                        self.svcs[j].name.clone(),
                    ));
                }
            }
        }
        let mut lines = Vec::new();
        let keys: BTreeSet<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        for (k, raw) in entries {
            let Some(raw) = raw else {
                lines.push(EnvLine {
                    key: k.clone(),
                    value: None,
                    comment: Some(format!("{k}: inherited from the environment of `binky up`")),
                });
                continue;
            };
            if let Some(v) = family_member(&k, &families) {
                lines.push(EnvLine {
                    key: k,
                    value: Some(v),
                    comment: None,
                });
                continue;
            }
            let v = self.interpolate(&raw);
            let v = self.map_addresses(i, Some(&k), &v);
            let secret = (secret_name(&k) && !literal_part(&v).trim().is_empty())
                || looks_secret(&v)
                || self.secrets.iter().any(|(s, _)| v.contains(s.as_str()));
            if secret {
                let var = single_reference(&raw).unwrap_or_else(|| k.clone());
                let from_dotenv = if self.vars.contains_key(&var) {
                    " (.env has it)"
                } else {
                    ""
                };
                self.reason(
                    &var,
                    format!("a credential: not copied into binky.toml{from_dotenv}"),
                );
                lines.push(EnvLine {
                    value: Some(format!("${{env.{var}}}")),
                    comment: Some(format!("{k} looked like a credential: not copied; set {var} in the environment of `binky up` (or an env_file)")),
                    key: k,
                });
                continue;
            }
            // `JWT_SECRET: ${JWT_SECRET}` is a reference already: say what to set.
            let comment = env_reference(&v)
                .filter(|_| secret_name(&k))
                .map(|var| {
                    format!(
                        "{k} is a credential: set {var} in the environment of `binky up` (or an env_file){}",
                        if self.vars.contains_key(var) { "; .env has it" } else { "" }
                    )
                });
            let anywhere = k.to_ascii_uppercase().contains("PORT");
            let v = self.self_ports(i, &v, anywhere);
            if let Some(line) = allowed_hosts(&k, &v, "compose") {
                lines.push(line);
                continue;
            }
            lines.push(EnvLine {
                key: k,
                value: Some(v),
                comment,
            });
        }
        // compose hands `.env` (or another env_file) to the service: its addresses of
        // compose services are pointed at binky's (`REDIS_URL=redis://redis:6379/0`), the rest
        // binky loads from the file as it is.
        let mut from_files: Vec<(String, String, String)> = Vec::new();
        if self.loads_dotenv(i) {
            for (k, v) in self.dotenv.clone() {
                from_files.push((".env".into(), k, v));
            }
        }
        for f in string_list_env_file(&def) {
            if normalise(&f) == Dir::Below(".env".into()) {
                continue;
            }
            if let Some(text) = self.env_files.get(&f) {
                for (k, v) in binky_controllers::env::parse_dotenv(text) {
                    from_files.push((f.clone(), k, v));
                }
            }
        }
        // PostgreSQL's address in parts in a file (`POSTGRES_HOST=postgres`).
        let mut file_families: Vec<(String, String)> = Vec::new();
        for (_, k, v) in &from_files {
            let upper = k.to_ascii_uppercase();
            if let Some(prefix) = upper.strip_suffix("HOST") {
                let prefix = prefix.trim_end_matches('_');
                if let Some(&j) = self.alias.get(&v.trim().to_ascii_lowercase()) {
                    if !prefix.is_empty() && self.svcs[j].kind == Kind::Adapter("postgres") {
                        file_families.push((prefix.to_owned(), self.svcs[j].name.clone()));
                    }
                }
            }
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (file, k, val) in from_files {
            if keys.contains(&k) || !seen.insert(k.clone()) {
                continue;
            }
            if let Some(v) = family_member(&k, &file_families) {
                lines.push(EnvLine {
                    comment: Some(format!(
                        "{k}: {file} points at a compose service; this overrides it"
                    )),
                    key: k,
                    value: Some(v),
                });
                continue;
            }
            if let Some(line) = allowed_hosts(&k, &val, &file) {
                lines.push(line);
                continue;
            }
            let v = self.map_addresses(i, Some(&k), &val);
            if v != val
                && !looks_secret(&v)
                && !self.secrets.iter().any(|(s, _)| v.contains(s.as_str()))
            {
                lines.push(EnvLine {
                    comment: Some(format!(
                        "{k}: {file} points at a compose service; this overrides it"
                    )),
                    key: k,
                    value: Some(v),
                });
            }
        }
        lines
    }
}

/// A framework's list of the hosts it answers (Django's `ALLOWED_HOSTS`, as
/// `DJANGO_ALLOWED_HOSTS` or `ALLOWED_HOSTS`, comma-separated) with binky's proxy hosts
/// (`web.<world>.<project>.localhost`) added, or `None` for any other variable.
pub(super) fn allowed_hosts(key: &str, value: &str, from: &str) -> Option<EnvLine> {
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
