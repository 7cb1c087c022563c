//! Shell-like globs over relative paths (`*`, `?`, `**`): `watch` patterns and
//! `clone_key_files`.

/// Does `text` match `pattern`, where `*` stands for any run of characters (spaces and `/`
/// included) and `?` for one: a person's pattern of commands (`npm test*`).
pub fn text_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative wildcard match: remember the last `*` and retry from one further.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

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
    #[test]
    fn a_command_pattern_matches_any_run_of_characters() {
        assert!(text_match("npm test*", "npm test"));
        assert!(text_match(
            "npm test*",
            "npm test -- src/a.test.js --watch=false"
        ));
        assert!(text_match(
            "pytest * -q",
            "pytest tests/api -k 'login and not slow' -q"
        ));
        assert!(text_match("make ?", "make a"));
        assert!(!text_match("npm test*", "npm run build && npm test"));
        assert!(!text_match("make ?", "make ab"));
        assert!(!text_match("npm test", "npm test; rm -rf ~"));
        assert!(text_match("*", ""));
    }

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
