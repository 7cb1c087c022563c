//! Recognising credentials in text: passwords inside URLs and the shapes of well-known
//! tokens. Used by `binky check` (an inline credential in `binky.toml`) and `binky init`.

/// What kind of credential `value` looks like, if any. Token references (`${env.X}`,
/// `${db.password}`) are never credentials.
pub fn credential_kind(value: &str) -> Option<&'static str> {
    if let Some(pw) = binky_controllers::url::password(value) {
        if !pw.is_empty() && !pw.starts_with("${") {
            return Some("a password inside a URL");
        }
    }
    for word in value.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';')) {
        if let Some(kind) = token_kind(word) {
            return Some(kind);
        }
    }
    if value.contains("-----BEGIN") && value.contains("PRIVATE KEY") {
        return Some("a PEM private key");
    }
    None
}

fn all(s: &str, f: impl Fn(char) -> bool) -> bool {
    !s.is_empty() && s.chars().all(f)
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// A word shaped like a well-known token.
pub fn token_kind(word: &str) -> Option<&'static str> {
    let w = word.trim();
    let upper_alnum = |s: &str| all(s, |c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if w.len() == 20 && ["AKIA", "ASIA"].iter().any(|p| w.starts_with(p)) && upper_alnum(&w[4..]) {
        return Some("an AWS access key id");
    }
    for p in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
        if let Some(rest) = w.strip_prefix(p) {
            if rest.len() >= 30 && all(rest, alnum) {
                return Some("a GitHub token");
            }
        }
    }
    if w.strip_prefix("github_pat_")
        .is_some_and(|r| r.len() >= 30 && all(r, |c| alnum(c) || c == '_'))
    {
        return Some("a GitHub token");
    }
    if w.strip_prefix("glpat-")
        .is_some_and(|r| r.len() >= 20 && all(r, |c| alnum(c) || c == '-' || c == '_'))
    {
        return Some("a GitLab token");
    }
    for p in ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"] {
        if w.strip_prefix(p)
            .is_some_and(|r| r.len() >= 10 && all(r, |c| alnum(c) || c == '-'))
        {
            return Some("a Slack token");
        }
    }
    for p in ["sk_live_", "rk_live_", "sk_test_", "rk_test_"] {
        if w.strip_prefix(p)
            .is_some_and(|r| r.len() >= 16 && all(r, alnum))
        {
            return Some("a Stripe key");
        }
    }
    if w.strip_prefix("sk-")
        .is_some_and(|r| r.len() >= 20 && all(r, |c| alnum(c) || c == '-' || c == '_'))
    {
        return Some("an API secret key (sk-…)");
    }
    // Other services' keys, by their documented prefixes (minimum body length).
    const PREFIXES: &[(&str, usize, &str)] = &[
        ("whsec_", 16, "a Stripe webhook secret"),
        ("xapp-", 10, "a Slack app token"),
        ("hf_", 30, "a Hugging Face token"),
        ("npm_", 30, "an npm token"),
        ("pypi-", 30, "a PyPI token"),
        ("shpat_", 20, "a Shopify token"),
        ("dop_v1_", 30, "a DigitalOcean token"),
        ("SG.", 30, "a SendGrid key"),
        ("AIza", 30, "a Google API key"),
        ("ya29.", 20, "a Google OAuth token"),
    ];
    for (p, min, kind) in PREFIXES {
        if w.strip_prefix(p).is_some_and(|r| {
            r.len() >= *min && all(r, |c| alnum(c) || matches!(c, '-' | '_' | '.'))
        }) {
            return Some(kind);
        }
    }
    let parts: Vec<&str> = w.split('.').collect();
    if parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts[1].starts_with("eyJ")
        && parts
            .iter()
            .all(|p| p.len() >= 8 && all(p, |c| alnum(c) || c == '-' || c == '_'))
    {
        return Some("a JSON Web Token");
    }
    None
}

/// The prefixes [`token_kind`] recognises tokens by.
const TOKEN_PREFIXES: &[&str] = &[
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxr-",
    "xoxs-",
    "sk_live_",
    "rk_live_",
    "sk_test_",
    "rk_test_",
    "sk-",
    "whsec_",
    "xapp-",
    "hf_",
    "npm_",
    "pypi-",
    "shpat_",
    "dop_v1_",
    "SG.",
    "AIza",
    "ya29.",
    "eyJ",
];

/// Could `word`, the last of an unfinished line, be the start of a credential that the rest
/// of the line completes? It carries a token's prefix, holds `://` (a URL whose password may
/// follow), or is a run of eight or more token characters. A shorter word (`45%`, `[y/N]`,
/// `end`) cannot begin a shape [`token_kind`] recognises except inside a prefix.
pub fn may_begin_credential(word: &str) -> bool {
    let token_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+');
    word.contains("://")
        || TOKEN_PREFIXES.iter().any(|p| word.starts_with(p))
        || (word.len() >= 8 && word.chars().all(token_char))
}

/// Is an env name one that holds a secret (`*PASSWORD*`, `*SECRET*`, `*TOKEN*`,
/// `*API_KEY*`, `*PRIVATE_KEY*`)?
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "PASSWORD",
        "PASSWD",
        "SECRET",
        "TOKEN",
        "API_KEY",
        "APIKEY",
        "PRIVATE_KEY",
        "ACCESS_KEY",
    ]
    .iter()
    .any(|p| n.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_shapes_are_recognised_and_references_are_not() {
        for (v, kind) in [
            ("postgres://u:hunter2@db:5432/app", "a password inside a URL"),
            ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
            ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "a GitHub token"),
            ("glpat-abcdefghij0123456789", "a GitLab token"),
            ("xoxb-1234567890-abcdef", "a Slack token"),
            ("sk_live_0123456789abcdefXYZ", "a Stripe key"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "a JSON Web Token",
            ),
            ("-----BEGIN RSA PRIVATE KEY-----\nMII", "a PEM private key"),
        ] {
            assert_eq!(credential_kind(v), Some(kind), "{v}");
        }
        assert_eq!(
            binky_controllers::url::password("postgres://u:p@ss@h:5/db"),
            Some("p@ss")
        );
        assert_eq!(binky_controllers::url::password("http://h/a@b"), None);
        for v in [
            "postgres://u:${env.PGPASS}@db/app",
            "postgres://db:5432/app",
            "${env.AWS_KEY}",
            "http://api.local/x@y",
            "plain words",
            "sk_live_short",
        ] {
            assert_eq!(credential_kind(v), None, "{v}");
        }
        assert!(secret_name("DB_PASSWORD") && secret_name("stripe_api_key"));
        assert!(!secret_name("DATABASE_URL"));
    }
}
