//! What looks like a credential, by its name or its shape, and the URLs written in text.

use binky_controllers::url::{find_outside_tokens, host_port, Url};

use super::images::IMAGE_ADAPTERS;

/// Does an environment name hold a secret (`*PASSWORD*`, `*SECRET*`, `*TOKEN*`, `*KEY*`,
/// …)? Erring towards yes only costs an `${env.NAME}` reference.
pub(in crate::init) fn secret_name(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    if matches!(k.as_str(), "PWD" | "OLDPWD") {
        return false;
    }
    [
        "PASSWORD",
        "PASSWD",
        "SECRET",
        "TOKEN",
        "KEY",
        "CREDENTIAL",
        "PRIVATE",
        "SALT",
    ]
    .iter()
    .any(|w| k.contains(w))
        || k.ends_with("PASS")
        || k.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| matches!(w, "PASS" | "PWD" | "DSN"))
}

/// The byte range of the first password inside a `scheme://user:password@host` in `text`
/// that is not itself a `${…}` reference.
pub(in crate::init) fn url_password(text: &str) -> Option<(usize, usize)> {
    scan_urls(text)
        .into_iter()
        .filter_map(|h| h.password)
        .find(|&(a, b)| b > a && !text[a..b].starts_with("${"))
}

/// A word shaped like a well-known token (cloud keys, GitHub/GitLab/Slack/Stripe tokens,
/// `sk-…` API keys, JWTs): [`crate::credentials::token_kind`], quotes and brackets trimmed.
pub(in crate::init) fn token_shaped(word: &str) -> bool {
    let w = word.trim_matches(|c: char| matches!(c, '"' | '\'' | '(' | ')' | '[' | ']'));
    crate::credentials::token_kind(w).is_some()
}

/// A long random-looking value (a generated key): 32+ characters of base64 with upper
/// case, lower case and digits, or of hex.
pub(in crate::init) fn random_looking(v: &str) -> bool {
    let v = v.trim();
    if v.len() < 32 || v.starts_with('/') || v.contains("${") {
        return false;
    }
    if !v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-'))
    {
        return false;
    }
    let has = |f: fn(&char) -> bool| v.chars().any(|c| f(&c));
    let hex = v.chars().all(|c| c.is_ascii_hexdigit());
    hex || (has(char::is_ascii_uppercase)
        && has(char::is_ascii_lowercase)
        && has(char::is_ascii_digit))
}

/// Does `v` look like a credential by its shape alone?
pub(in crate::init) fn looks_secret(v: &str) -> bool {
    url_password(v).is_some()
        || v.contains("-----BEGIN")
        || v.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '='))
            .any(token_shaped)
        || random_looking(v)
}

/// Values too short or too common to hunt for in free text (a password `postgres` is a
/// default, not a secret; scrubbing it would break `adapter = "postgres"`).
pub(in crate::init) fn worth_hunting(v: &str) -> bool {
    const COMMON: &[&str] = &[
        "admin",
        "changeme",
        "default",
        "development",
        "example",
        "guest",
        "localhost",
        "minio",
        "minioadmin",
        "mysql",
        "password",
        "postgres",
        "redis",
        "secret",
        "testing",
    ];
    let lower = v.to_ascii_lowercase();
    // Nor a word the file itself is made of (`RABBITMQ_DEFAULT_PASS: rabbitmq`).
    let structural = IMAGE_ADAPTERS
        .iter()
        .any(|(needle, adapter)| lower == *needle || lower == *adapter);
    v.chars().count() >= 6 && !v.contains("${") && !structural && !COMMON.contains(&lower.as_str())
}

/// A development placeholder a compose file gives as a credential's default (`devkey`,
/// `changethis`, `dev-secret`, `postgres`): lower-case letters with `-`, `_` or `.`, at
/// most 32 characters, no digit: a word, not a generated value. Copied as
/// `${env.NAME:-devkey}`; anything else (mixed case, digits, a token's shape) is not.
pub(in crate::init) fn placeholder(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 32
        && v.chars().any(|c| c.is_ascii_lowercase())
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || matches!(c, '-' | '_' | '.'))
        && !looks_secret(v)
}

/// Text without its `${…}` references: what is written literally.
pub(in crate::init) fn literal_part(v: &str) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => rest = &rest[i + j + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

// ------------------------------------------------------------------------------------
// URLs in text
// ------------------------------------------------------------------------------------

/// A `scheme://[user[:password]@]host[:port][rest]` found in text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) struct UrlHit {
    /// Byte range of the whole URL.
    pub(in crate::init) start: usize,
    pub(in crate::init) end: usize,
    pub(in crate::init) scheme: String,
    /// Byte range of the password, when there is one.
    pub(in crate::init) password: Option<(usize, usize)>,
    /// Lower-case.
    pub(in crate::init) host: String,
    pub(in crate::init) port: Option<u16>,
    /// Path, query and fragment.
    pub(in crate::init) rest: String,
}

/// Every URL written in `text`.
pub(in crate::init) fn scan_urls(text: &str) -> Vec<UrlHit> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let sep = from + i;
        from = sep + 3;
        let mut start = sep;
        while start > 0 && (b[start - 1].is_ascii_alphanumeric() || b"+.-".contains(&b[start - 1]))
        {
            start -= 1;
        }
        while start < sep && !b[start].is_ascii_alphabetic() {
            start += 1;
        }
        if start == sep {
            continue;
        }
        let body_start = sep + 3;
        let body_len = find_outside_tokens(&text[body_start..], |c| {
            c.is_whitespace() || "\"',;)]}<>|`".contains(c)
        })
        .unwrap_or(text.len() - body_start);
        let end = body_start + body_len;
        let url = Url::after_scheme_with_tokens(&text[start..sep], &text[body_start..end]);
        // The user info opens the body: the password ends where it does.
        let password = url.userinfo.zip(url.password()).map(|(info, pw)| {
            let to = body_start + info.len();
            (to - pw.len(), to)
        });
        // `[v6]:port` loses its brackets here; a bracket left open is read to its end.
        let (host, port) = host_port(url.host).unwrap_or((url.host, None));
        let host = host.trim_start_matches('[').trim_end_matches(']');
        out.push(UrlHit {
            start,
            end,
            scheme: url.scheme.to_ascii_lowercase(),
            password,
            host: host.to_ascii_lowercase(),
            port: port.and_then(|p| p.parse().ok()),
            rest: url.tail.to_owned(),
        });
        from = end.max(from);
    }
    out
}
