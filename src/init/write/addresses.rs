//! Writing addresses: compose services named in values and commands, as binky's tokens.

use super::Writer;
use crate::init::images::default_port;
use crate::init::plan::{Kind, SvcId};
use crate::init::secrets::{scan_urls, UrlHit};
use crate::init::toml_out::q;
use crate::init::values::{host_ports, read_by_browser};

impl Writer {
    /// Addresses of compose services written in `text` (owned by service `owner`, under
    /// env `key`) as binky tokens.
    pub(in crate::init) fn map_addresses(
        &mut self,
        owner: SvcId,
        key: Option<&str>,
        text: &str,
    ) -> String {
        let who = match key {
            Some(k) => format!("{}: env {k}", self.plan.svcs[owner].name),
            None => format!("{}: cmd", self.plan.svcs[owner].name),
        };
        let mut out = String::new();
        let mut last = 0;
        for hit in scan_urls(text) {
            // `http://localhost:5173` is the service that publishes host port 5173.
            let (j, hit) = match self.plan.alias.get(&hit.host) {
                Some(&j) => (j, hit),
                None => match self.published_at(&hit) {
                    Some((j, container)) => {
                        let mut hit = hit;
                        hit.port = Some(container);
                        (j, hit)
                    }
                    None => continue,
                },
            };
            let target = self.plan.svcs[j].name.clone();
            let replacement = match self.plan.svcs[j].kind {
                Kind::Adapter(_) => {
                    if hit.start != 0 || hit.end != text.len() {
                        self.plan.todo(format!("{who}: the address of {target} inside it is now ${{{target}.url}} (the slice's own URL, with its own user): check the form around it"));
                    }
                    Some(format!("${{{target}.url}}"))
                }
                Kind::Process if hit.password.is_none() => Some(self.process_address(j, &hit, key)),
                Kind::Commented(_) if hit.password.is_none() && self.as_if_running => {
                    Some(self.process_address(j, &hit, key))
                }
                Kind::Commented(_) if hit.password.is_none() => {
                    if !self.commented_refs.contains(&target) {
                        self.commented_refs.push(target.clone());
                    }
                    let port = hit.port.map(|p| format!(":{p}")).unwrap_or_default();
                    Some(format!("{}://localhost{port}{}", hit.scheme, hit.rest))
                }
                Kind::Process | Kind::Commented(_) => None,
                Kind::Unmapped | Kind::Replaced(_) => {
                    self.plan.todo(format!(
                        "{who} points at {}, which is not in binky.toml",
                        self.plan.svcs[j].raw
                    ));
                    None
                }
            };
            if let Some(r) = replacement {
                out.push_str(&text[last..hit.start]);
                out.push_str(&r);
                last = hit.end;
            }
        }
        out.push_str(&text[last..]);
        if last > 0 {
            return out;
        }
        let Some(key) = key else { return out };
        // `api:8000`, `kafka:9092,kafka2:9092`, or a bare `db` under a *_HOST key.
        let items = host_ports(text);
        let hostish = {
            let k = key.to_ascii_uppercase();
            k.contains("HOST") || k.contains("SERVER") || k.contains("ADDR")
        };
        if items.is_empty()
            || !items
                .iter()
                .all(|(h, p)| self.plan.alias.contains_key(h) && (p.is_some() || hostish))
        {
            return out;
        }
        let mut mapped = Vec::new();
        for (host, port) in items {
            let j = self.plan.alias[&host];
            let target = self.plan.svcs[j].name.clone();
            let item = match (self.plan.svcs[j].kind, port) {
                (Kind::Process, Some(p)) => {
                    let tok = self.plan.layouts[j]
                        .token(&target, p)
                        .unwrap_or_else(|| format!("${{{target}.port}}"));
                    format!("localhost:{tok}")
                }
                (Kind::Process, None) => "localhost".to_owned(),
                (Kind::Commented(_), _) if self.as_if_running => match port {
                    Some(p) => {
                        let tok = self.plan.layouts[j]
                            .token(&target, p)
                            .unwrap_or_else(|| format!("${{{target}.port}}"));
                        format!("localhost:{tok}")
                    }
                    None => "localhost".to_owned(),
                },
                (Kind::Commented(_), _) => {
                    if !self.commented_refs.contains(&target) {
                        self.commented_refs.push(target.clone());
                    }
                    match port {
                        Some(p) => format!("localhost:{p}"),
                        None => "localhost".to_owned(),
                    }
                }
                (Kind::Adapter("postgres"), Some(_)) => {
                    format!("${{{target}.host}}:${{{target}.port}}")
                }
                (Kind::Adapter("postgres"), None) => format!("${{{target}.host}}"),
                (Kind::Adapter(_), _) => {
                    self.plan.todo(format!("{who} = {} names compose's {target}: binky gives its slice as one address with its own user, ${{{target}.url}}; have the app read that", q(text.trim())));
                    return text.to_owned();
                }
                (Kind::Unmapped | Kind::Replaced(_), _) => {
                    self.plan.todo(format!(
                        "{who} points at {}, which is not in binky.toml",
                        self.plan.svcs[j].raw
                    ));
                    return text.to_owned();
                }
            };
            mapped.push(item);
        }
        mapped.join(",")
    }

    /// The service publishing the host port of a `localhost` URL, and its container port.
    fn published_at(&self, hit: &UrlHit) -> Option<(SvcId, u16)> {
        if !matches!(hit.host.as_str(), "localhost" | "127.0.0.1" | "0.0.0.0") {
            return None;
        }
        let port = hit.port.or_else(|| default_port(&hit.scheme))?;
        self.plan.published.get(&port).copied()
    }

    /// `http://api:8000/v1` → `${api.url}/v1` (the direct address, for a server's own
    /// calls), or `${api.proxy_url}/v1` under a key a browser reads (`VITE_API_URL`, CORS
    /// origins, OAuth redirects: see [`read_by_browser`]); other ports and schemes →
    /// `scheme://localhost:${api.LABEL}…`.
    pub(in crate::init) fn process_address(
        &self,
        j: SvcId,
        hit: &UrlHit,
        key: Option<&str>,
    ) -> String {
        let name = &self.plan.svcs[j].name;
        let layout = &self.plan.layouts[j];
        let port = hit.port.or_else(|| default_port(&hit.scheme));
        let index = port.and_then(|p| layout.slots.iter().position(|(q, _)| *q == p));
        match (index, port) {
            (Some(0), _) if layout.url && matches!(hit.scheme.as_str(), "http" | "https") => {
                let token = if key.is_some_and(read_by_browser) {
                    "proxy_url"
                } else {
                    "url"
                };
                format!("${{{name}.{token}}}{}", hit.rest)
            }
            (Some(_), Some(p)) => format!(
                "{}://localhost:{}{}",
                hit.scheme,
                layout.token(name, p).unwrap_or_default(),
                hit.rest
            ),
            _ => format!("{}://localhost:${{{name}.port}}{}", hit.scheme, hit.rest),
        }
    }

    /// `8000` → `${self.port}` in `text`, for each container port of service `i`. In env
    /// values (`anywhere` false) only after a `:` (`localhost:8000`), unless the key is a
    /// port's.
    pub(in crate::init) fn self_ports(&self, i: SvcId, text: &str, anywhere: bool) -> String {
        let layout = &self.plan.layouts[i];
        if layout.slots.is_empty() {
            return text.to_owned();
        }
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut k = 0;
        while k < b.len() {
            if b[k] == b'$' && b.get(k + 1) == Some(&b'{') {
                let end = text[k..].find('}').map_or(b.len(), |e| k + e + 1);
                out.push_str(&text[k..end]);
                k = end;
                continue;
            }
            if b[k].is_ascii_digit() {
                let end = k + b[k..].iter().take_while(|c| c.is_ascii_digit()).count();
                let prev = if k > 0 { b[k - 1] } else { b' ' };
                let next = b.get(end).copied().unwrap_or(b' ');
                let dotted = prev == b'.'
                    || (next == b'.' && b.get(end + 1).is_some_and(u8::is_ascii_digit));
                let word = prev.is_ascii_alphabetic()
                    || prev == b'_'
                    || next.is_ascii_alphabetic()
                    || next == b'_';
                let context = anywhere || prev == b':';
                let token = text[k..end]
                    .parse::<u16>()
                    .ok()
                    .filter(|_| !dotted && !word && context)
                    .and_then(|p| layout.token("self", p));
                match token {
                    Some(t) => out.push_str(&t),
                    None => out.push_str(&text[k..end]),
                }
                k = end;
                continue;
            }
            let ch = text[k..].chars().next().unwrap_or(' ');
            out.push(ch);
            k += ch.len_utf8();
        }
        out
    }
}
