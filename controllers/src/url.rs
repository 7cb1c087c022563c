//! The one reader of `scheme://user:password@host:port/path?query#fragment` addresses
//! (admin URLs, slice addresses, URLs in `binky.toml` values), and the percent-encoding
//! they use.
//!
//! # Guarantees
//! - The authority ends at the first `/`, `?` or `#`; the user info ends at the authority's
//!   *last* `@`, and the user at the user info's *first* `:` (so an unencoded password may
//!   hold `@` or `:`).
//! - Nothing is decoded or validated by [`Url::parse`]: each adapter decides what it
//!   accepts and says so in its own words; the parts are slices of the text as written.
//! - [`redact_server`] and [`without_credentials`] never return a user info.
//!
//! # Caveats
//! - A password holding `/`, `?` or `#` must be percent-encoded (RFC 3986 says so too);
//!   written raw, it ends the authority there, in every reader alike.
//! - A host may be a comma-separated list (`mongodb://h1,h2`, `kafka://h1,h2`): [`Url::host`]
//!   is the list as written.
//! - A URL still holding `${…}` tokens (a value of `binky.toml` or a compose file before it
//!   is resolved) is read with [`Url::parse_with_tokens`]: a token is one unit, so the `:`
//!   and `/` of `${env.PW:-a/b}` split nothing. [`Url::parse`] reads every character.

/// A URL split into its parts, as written (nothing percent-decoded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Url<'a> {
    /// Before `://`, as written (not lowercased).
    pub scheme: &'a str,
    /// Before the authority's last `@` (`None` without an `@`; `Some("")` for `h://@x`).
    pub userinfo: Option<&'a str>,
    /// The authority without its user info: `host`, `host:port`, `[v6]:port`, or a
    /// comma-separated list of them.
    pub host: &'a str,
    /// Everything after the authority: path, `?query` and `#fragment` as written (starts
    /// with `/`, `?` or `#`, or is empty).
    pub tail: &'a str,
    /// Whether `${…}` tokens are single units (see [`Url::parse_with_tokens`]).
    tokens: bool,
}

impl<'a> Url<'a> {
    /// Split `scheme://authority…`; `None` when the text has no `://`.
    pub fn parse(url: &'a str) -> Option<Url<'a>> {
        let (scheme, rest) = url.split_once("://")?;
        Some(Url::after_scheme(scheme, rest))
    }

    /// Split what follows `scheme://` (or a bare `authority/path…` with no scheme, which a
    /// caller may accept): `scheme` is kept as given.
    pub fn after_scheme(scheme: &'a str, rest: &'a str) -> Url<'a> {
        Url::split(scheme, rest, false)
    }

    /// As [`Url::parse`], for a URL that may still hold `${…}` tokens: no delimiter inside
    /// a token counts (`postgres://u:${env.PW:-a/b:c}@db/app` has the password
    /// `${env.PW:-a/b:c}` and the host `db`).
    pub fn parse_with_tokens(url: &'a str) -> Option<Url<'a>> {
        let (scheme, rest) = url.split_once("://")?;
        Some(Url::after_scheme_with_tokens(scheme, rest))
    }

    /// As [`Url::after_scheme`], with `${…}` tokens as single units.
    pub fn after_scheme_with_tokens(scheme: &'a str, rest: &'a str) -> Url<'a> {
        Url::split(scheme, rest, true)
    }

    fn split(scheme: &'a str, rest: &'a str, tokens: bool) -> Url<'a> {
        let end = find(rest, tokens, |c| matches!(c, '/' | '?' | '#')).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let at = if tokens {
            last_outside_tokens(authority, |c| c == '@')
        } else {
            authority.rfind('@')
        };
        let (userinfo, host) = match at {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        Url {
            scheme,
            userinfo,
            host,
            tail,
            tokens,
        }
    }

    /// The user info split at its first `:` (outside tokens when read with them).
    fn user_and_password(&self) -> Option<(&'a str, Option<&'a str>)> {
        let u = self.userinfo?;
        Some(match find(u, self.tokens, |c| c == ':') {
            Some(i) => (&u[..i], Some(&u[i + 1..])),
            None => (u, None),
        })
    }

    /// The user as written (percent-encoded), when there is a user info.
    pub fn user(&self) -> Option<&'a str> {
        self.user_and_password().map(|(user, _)| user)
    }

    /// The password as written (percent-encoded; may be empty), when the user info has a `:`.
    pub fn password(&self) -> Option<&'a str> {
        self.user_and_password()?.1
    }

    /// The path: the tail up to its `?` or `#` (starts with `/`, or is empty).
    pub fn path(&self) -> &'a str {
        let end = find(self.tail, self.tokens, |c| matches!(c, '?' | '#'));
        &self.tail[..end.unwrap_or(self.tail.len())]
    }

    /// The query: after the first `?`, up to a `#` (empty when there is none).
    pub fn query(&self) -> &'a str {
        let fragment = find(self.tail, self.tokens, |c| c == '#');
        let before_fragment = &self.tail[..fragment.unwrap_or(self.tail.len())];
        find(before_fragment, self.tokens, |c| c == '?').map_or("", |i| &before_fragment[i + 1..])
    }
}

/// The first character matching `f`, outside `${…}` tokens when `tokens` is set.
fn find(s: &str, tokens: bool, f: impl Fn(char) -> bool) -> Option<usize> {
    if tokens {
        find_outside_tokens(s, f)
    } else {
        s.find(f)
    }
}

/// Byte offset of the first character of `s` matching `f` outside `${…}` tokens (nested
/// ones included).
pub fn find_outside_tokens(s: &str, f: impl Fn(char) -> bool) -> Option<usize> {
    outside_tokens(s).find(|&(_, c)| f(c)).map(|(i, _)| i)
}

/// Byte offset of the last character of `s` matching `f` outside `${…}` tokens.
fn last_outside_tokens(s: &str, f: impl Fn(char) -> bool) -> Option<usize> {
    outside_tokens(s)
        .filter(|&(_, c)| f(c))
        .last()
        .map(|(i, _)| i)
}

/// The characters of `s` (with their offsets) that are not part of a `${…}` token.
fn outside_tokens(s: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut depth = 0usize;
    let mut prev = ' ';
    s.char_indices().filter(move |&(_, c)| {
        let outside = if c == '{' && prev == '$' {
            depth += 1;
            false
        } else if c == '}' && depth > 0 {
            depth -= 1;
            false
        } else {
            depth == 0
        };
        prev = c;
        outside
    })
}

/// The password of `scheme://user:password@host…` as written (percent-encoded, may be
/// empty), if the text has one.
pub fn password(url: &str) -> Option<&str> {
    Url::parse(url)?.password()
}

/// The password of `scheme://user:password@host…`, percent-decoded; `None` when there is
/// none or it is empty.
pub fn password_decoded(url: &str) -> Option<String> {
    password(url)
        .filter(|pw| !pw.is_empty())
        .map(percent_decode)
}

/// `scheme://user:pw@host:port/…` → `scheme://host:port` (a server, for keys and messages).
/// Text without `://` is returned as it is.
pub fn redact_server(url: &str) -> String {
    match Url::parse(url) {
        Some(u) => format!("{}://{}", u.scheme, u.host),
        None => url.to_owned(),
    }
}

/// `postgres://u:pw@host:5432/db?x` → `postgres://host:5432/db?x`: the address to show.
/// Text without `://` is returned as it is.
pub fn without_credentials(url: &str) -> String {
    match Url::parse(url) {
        Some(u) => format!("{}://{}{}", u.scheme, u.host, u.tail),
        None => url.to_owned(),
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` → the host (brackets kept) and the port text
/// if one is written; `None` when a bracketed host is not closed or is followed by
/// anything but `:port`. Neither part is checked further.
pub fn host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if s.starts_with('[') {
        let close = s.find(']')?;
        let (host, after) = s.split_at(close + 1);
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        Some((host, port))
    } else {
        Some(match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        })
    }
}

/// Everything but RFC 3986's unreserved characters, percent-encoded (for user info and
/// path segments).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%xx` sequences decoded (invalid ones kept as written).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            // Bytes, not `&s[..]`: a `%` before a multi-byte character must not split it.
            if let (Some(hi), Some(lo)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url_splits_into_its_parts() {
        let u = Url::parse("postgres://admin:s3cret@127.0.0.1:5432/app?sslmode=disable#x").unwrap();
        assert_eq!(u.scheme, "postgres");
        assert_eq!(u.userinfo, Some("admin:s3cret"));
        assert_eq!(u.user(), Some("admin"));
        assert_eq!(u.password(), Some("s3cret"));
        assert_eq!(u.host, "127.0.0.1:5432");
        assert_eq!(u.tail, "/app?sslmode=disable#x");
        assert_eq!(u.path(), "/app");
        assert_eq!(u.query(), "sslmode=disable");
    }

    #[test]
    fn a_password_may_hold_at_signs_and_colons() {
        let u = Url::parse("mysql://root:p@ss:w@rd@db:3306/x").unwrap();
        assert_eq!(u.user(), Some("root"));
        assert_eq!(u.password(), Some("p@ss:w@rd"));
        assert_eq!(u.host, "db:3306");
        // As written: decoding is the caller's (see passwords_are_read_back_from_urls).
        assert_eq!(password("postgres://u:a%27b%40c@h/d"), Some("a%27b%40c"));
    }

    #[test]
    fn without_a_user_or_a_port_or_a_path() {
        let u = Url::parse("redis://127.0.0.1:6379").unwrap();
        assert_eq!((u.userinfo, u.user(), u.password()), (None, None, None));
        assert_eq!(
            (u.host, u.tail, u.path(), u.query()),
            ("127.0.0.1:6379", "", "", "")
        );
        let u = Url::parse("https://search.example").unwrap();
        assert_eq!(u.host, "search.example");
        let u = Url::parse("redis://:pw@h:6379/0").unwrap();
        assert_eq!((u.user(), u.password()), (Some(""), Some("pw")));
        let u = Url::parse("http://admin@h").unwrap();
        assert_eq!((u.user(), u.password()), (Some("admin"), None));
        let u = Url::parse("http://@h").unwrap();
        assert_eq!((u.userinfo, u.password()), (Some(""), None));
        assert_eq!(password_decoded("redis://u:@h"), None);
        assert_eq!(password_decoded("redis://127.0.0.1:6379"), None);
    }

    #[test]
    fn the_authority_ends_at_the_first_slash_question_mark_or_hash() {
        let u = Url::parse("mongodb://u:pw@h1:27017,h2/?replicaSet=rs0&tls=true").unwrap();
        assert_eq!(u.host, "h1:27017,h2");
        assert_eq!(u.path(), "/");
        assert_eq!(u.query(), "replicaSet=rs0&tls=true");
        let u = Url::parse("http://h?x=/y#f?z").unwrap();
        assert_eq!((u.host, u.path(), u.query()), ("h", "", "x=/y"));
        let u = Url::parse("http://u:pw@h#frag@x").unwrap();
        assert_eq!((u.password(), u.host), (Some("pw"), "h"));
        // An `@` in the path is no user info.
        assert_eq!(password("http://h/a@b"), None);
        // Text before the scheme is kept in it: a URL inside a value is still read.
        assert_eq!(password("DATABASE_URL=postgres://u:pw@h/db"), Some("pw"));
    }

    #[test]
    fn ipv6_hosts_keep_their_brackets() {
        let u = Url::parse("http://u:p@[::1]:8123/base").unwrap();
        assert_eq!(u.host, "[::1]:8123");
        assert_eq!(host_port(u.host), Some(("[::1]", Some("8123"))));
        assert_eq!(host_port("[::1]"), Some(("[::1]", None)));
        assert_eq!(host_port("[]"), Some(("[]", None)));
        assert_eq!(host_port("[::1]:"), Some(("[::1]", Some(""))));
        assert_eq!(host_port("[::1"), None);
        assert_eq!(host_port("[::1]x"), None);
        assert_eq!(host_port("h:99"), Some(("h", Some("99"))));
        assert_eq!(host_port("h"), Some(("h", None)));
        assert_eq!(host_port(""), Some(("", None)));
    }

    #[test]
    fn tokens_are_single_units_when_read_with_them() {
        let text = "postgres://u:${env.PW:-a/b:c@d}@db:5432/app?x=${env.Q:-#}";
        let u = Url::parse_with_tokens(text).unwrap();
        assert_eq!(u.user(), Some("u"));
        assert_eq!(u.password(), Some("${env.PW:-a/b:c@d}"));
        assert_eq!(u.host, "db:5432");
        assert_eq!(u.tail, "/app?x=${env.Q:-#}");
        assert_eq!((u.path(), u.query()), ("/app", "x=${env.Q:-#}"));
        let u = Url::parse_with_tokens("http://${env.USER:-a:b}:${x}@h").unwrap();
        assert_eq!(
            (u.user(), u.password()),
            (Some("${env.USER:-a:b}"), Some("${x}"))
        );
        // Read as written, the same text splits inside the tokens.
        let plain = Url::parse(text).unwrap();
        assert_eq!(plain.host, "u:${env.PW:-a");
        // Nested tokens, and a `}` with no token open, which is an ordinary character.
        assert_eq!(find_outside_tokens("${a${b:c}}:x", |c| c == ':'), Some(10));
        assert_eq!(find_outside_tokens("}:", |c| c == ':'), Some(1));
        assert_eq!(find_outside_tokens("${a:b", |c| c == ':'), None);
    }

    #[test]
    fn text_that_is_not_a_url_has_no_parts() {
        assert_eq!(Url::parse("u:secretpw@h"), None);
        assert_eq!(password("u:secretpw@h"), None);
        assert_eq!(redact_server("u:secretpw@h"), "u:secretpw@h");
        let bare = Url::after_scheme("", "h1:9092,h2/x");
        assert_eq!((bare.host, bare.tail), ("h1:9092,h2", "/x"));
    }

    #[test]
    fn credentials_never_reach_a_shown_address() {
        assert_eq!(
            redact_server("postgres://admin:s3cret@127.0.0.1:5432/postgres"),
            "postgres://127.0.0.1:5432"
        );
        assert_eq!(redact_server("redis://:pw@h:6379/0"), "redis://h:6379");
        assert_eq!(redact_server("redis://h:6379"), "redis://h:6379");
        assert_eq!(redact_server("http://u:p@ss@h?q#f"), "http://h");
        assert_eq!(
            without_credentials("postgres://u:pw@127.0.0.1:5432/bk_x?sslmode=disable"),
            "postgres://127.0.0.1:5432/bk_x?sslmode=disable"
        );
        assert_eq!(without_credentials("s3.example"), "s3.example");
    }

    #[test]
    fn passwords_are_read_back_from_urls() {
        assert_eq!(
            password_decoded("postgres://postgres:abc@127.0.0.1:5/postgres").as_deref(),
            Some("abc")
        );
        assert_eq!(
            password_decoded("redis://default:xyz@127.0.0.1:6379").as_deref(),
            Some("xyz")
        );
        assert_eq!(password_decoded("redis://127.0.0.1:6379"), None);
        assert_eq!(
            password_decoded("postgres://u:a%27b%40c@h/d").as_deref(),
            Some("a'b@c")
        );
        assert_eq!(
            password_decoded("postgres://u:100%@h/d").as_deref(),
            Some("100%")
        );
    }

    #[test]
    fn percent_encoding_round_trips() {
        assert_eq!(
            percent_encode("a'b@c/d:€ ~-._"),
            "a%27b%40c%2Fd%3A%E2%82%AC%20~-._"
        );
        for s in ["p@ss/€", "100%", "a b", ""] {
            assert_eq!(percent_decode(&percent_encode(s)), s);
        }
    }

    #[test]
    fn percent_decoding_takes_bytes_and_leaves_what_is_not_an_escape() {
        assert_eq!(percent_decode("p%40ss%2F%e2%82%ac"), "p@ss/€");
        // A `%` before a multi-byte character once split it (a panic in the daemon).
        assert_eq!(percent_decode("%aé%"), "%aé%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("100%"), "100%");
    }
}
