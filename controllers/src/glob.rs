//! Shell-like globs over relative paths (`*`, `?`, `**`): `watch` patterns and
//! `clone_key_files`.

/// Does `path` (relative, `/`-separated) match `pattern` (`*`, `?`, `**`)?
pub fn glob_match(pattern: &str, path: &str) -> bool {
    fn rec(p: &[&str], s: &[&str]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(&"**") => (0..=s.len()).any(|i| rec(&p[1..], &s[i..])),
            Some(seg) => {
                !s.is_empty() && seg_match(seg.as_bytes(), s[0].as_bytes()) && rec(&p[1..], &s[1..])
            }
        }
    }
    fn seg_match(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => seg_match(&p[1..], s) || (!s.is_empty() && seg_match(p, &s[1..])),
            (Some(b'?'), Some(_)) => seg_match(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => seg_match(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern
        .trim_start_matches("./")
        .split('/')
        .filter(|x| !x.is_empty())
        .collect();
    let s: Vec<&str> = path.split('/').filter(|x| !x.is_empty()).collect();
    rec(&p, &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match("migrations/**", "migrations/001_init.sql"));
        assert!(glob_match("migrations/**", "migrations/a/b.sql"));
        assert!(!glob_match("migrations/**", "src/x.sql"));
        assert!(glob_match("*.sql", "seed.sql"));
        assert!(!glob_match("*.sql", "db/seed.sql"));
        assert!(glob_match("**/*.sql", "db/seed.sql"));
        assert!(glob_match("seed.sq?", "seed.sql"));
    }
}
