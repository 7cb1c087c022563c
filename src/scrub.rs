//! The log scrubber: every service's output passes through a small process of its own
//! (`binky __scrub LOG`, started next to the service, in its own process group) that writes
//! it to the log file with credentials replaced by `[secret]`:
//! - the values binky handed the service that are secret: resolved `${secret:REF}`s, the
//!   passwords inside URLs in its environment (a slice's `DATABASE_URL`), and the values of
//!   variables named like secrets (`*PASSWORD*`, `*TOKEN*`, …);
//! - anything shaped like a well-known credential ([`crate::credentials`]): cloud keys,
//!   GitHub/GitLab/Slack/Stripe tokens, JWTs, passwords inside URLs.
//!
//! A line with nothing to replace is written byte for byte. The scrubber belongs to the
//! service, not to the daemon: a daemon that stops or dies never breaks a service's stdout;
//! the scrubber exits when the service and everything it started have closed their output.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use crate::credentials::{secret_name, token_kind};
use binky_controllers::url::password as url_password;

/// The environment variable that carries the values to scrub to the scrubber process.
pub const VALUES_VAR: &str = "BINKY_SCRUB_VALUES";
const MARK: &[u8] = b"[secret]";
const MAX_LINE: usize = 64 * 1024;

/// What to scrub for a process with `env` (and the resolved secrets `extra`).
pub fn values_for(env: &BTreeMap<String, String>, extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = extra.to_vec();
    for (k, v) in env {
        if let Some(pw) = url_password(v) {
            if !pw.is_empty() {
                out.push(pw.to_owned());
            }
        }
        if secret_name(k) && !v.is_empty() {
            out.push(v.clone());
        }
    }
    out.retain(|v| v.len() >= 4);
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out.dedup();
    out
}

/// Replaces credentials in lines.
pub struct Scrubber {
    values: Vec<memchr::memmem::Finder<'static>>,
}

/// The shortest word [`token_kind`] can recognise (`xoxb-` and ten characters).
const SHORTEST_TOKEN: usize = 15;

impl Scrubber {
    /// A scrubber for these literal values (and every known credential shape).
    pub fn new(values: &[String]) -> Self {
        Scrubber {
            values: values
                .iter()
                .map(|v| memchr::memmem::Finder::new(v.as_bytes()).into_owned())
                .collect(),
        }
    }

    /// How much of an unfinished line can be written now without a secret leaking when its
    /// rest arrives later: everything before any tail that could begin one of the secret
    /// values binky handed the service (a value may hold separators), and before a last word
    /// that may begin a credential shape ([`crate::credentials::may_begin_credential`]).
    pub fn safe_prefix(&self, partial: &[u8]) -> usize {
        let word_start = partial
            .iter()
            .rposition(|b| is_separator(*b))
            .map_or(0, |i| i + 1);
        let last_word = String::from_utf8_lossy(&partial[word_start..]);
        let mut cut = if crate::credentials::may_begin_credential(&last_word) {
            word_start
        } else {
            partial.len()
        };
        for v in &self.values {
            let needle = v.needle();
            let from = partial.len().saturating_sub(needle.len().saturating_sub(1));
            if let Some(i) = (from..partial.len()).find(|i| needle.starts_with(&partial[*i..])) {
                cut = cut.min(i);
            }
        }
        cut
    }

    /// `line` with its credentials replaced; borrowed (byte for byte) when there are none.
    pub fn line<'a>(&self, line: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out: Cow<'a, [u8]> = Cow::Borrowed(line);
        for v in &self.values {
            let mut from = 0;
            while let Some(i) = v.find(&out[from..]).map(|i| i + from) {
                let mut o = out.into_owned();
                o.splice(i..i + v.needle().len(), MARK.iter().copied());
                from = i + MARK.len();
                out = Cow::Owned(o);
            }
        }
        let Ok(text) = std::str::from_utf8(&out) else {
            return out;
        };
        let mut changed = String::new();
        let mut last = 0;
        let mut any = false;
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            // A word: a run of non-space, non-quote characters.
            if is_separator(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && !is_separator(bytes[i]) {
                i += 1;
            }
            let word = &text[start..i];
            let word = word.trim_end_matches(['.', ')', ']']);
            let end = start + word.len();
            if word.len() >= SHORTEST_TOKEN && token_kind(word).is_some() {
                changed.push_str(&text[last..start]);
                changed.push_str("[secret]");
                last = end;
                any = true;
            } else if let Some(pw) = word
                .contains("://")
                .then(|| url_password(word))
                .flatten()
                .filter(|p| !p.is_empty() && !p.starts_with("${"))
            {
                if let Some(off) = word.find(&format!(":{pw}@")) {
                    let a = start + off + 1;
                    changed.push_str(&text[last..a]);
                    changed.push_str("[secret]");
                    last = a + pw.len();
                    any = true;
                }
            }
        }
        if !any {
            return out;
        }
        changed.push_str(&text[last..]);
        Cow::Owned(changed.into_bytes())
    }
}

/// Ends a word (a token shape is looked for in words).
fn is_separator(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b',' | b';' | b'=')
}

/// `binky __scrub LOG`: copy stdin to LOG (appending), scrubbed; exit at end of input.
///
/// A line that stays unfinished (a prompt, a progress bar) is written after a 200 ms pause
/// up to [`Scrubber::safe_prefix`]: a tail that may begin a secret waits for the rest of the
/// line, however long that takes, so a secret binky handed the service never reaches the
/// file in two pieces. A credential binky only knows by its shape can still escape when it
/// is split inside its first eight characters (or its prefix) and the pieces come more than
/// 200 ms apart.
pub fn run_shim(log: &Path) -> i32 {
    let values: Vec<String> = std::env::var(VALUES_VAR)
        .ok()
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    let scrubber = Scrubber::new(&values);
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    binky_platform::fs::with_mode(&mut opts, 0o600);
    let Ok(mut file) = opts.open(log) else {
        // Nowhere to write: drain, so the service never blocks or dies on a closed pipe.
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        return 1;
    };
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 16 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    // The unfinished line was written as far as it safely can be: wait for more input.
    let mut settled = false;
    loop {
        // A line that stays unfinished is written after a pause, as far as is safe.
        if !carry.is_empty() && !settled && binky_platform::io::stdin_quiet_for(200) {
            let cut = scrubber.safe_prefix(&carry);
            let _ = file.write_all(&scrubber.line(&carry[..cut]));
            carry.drain(..cut);
            settled = true;
            continue;
        }
        settled = false;
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        carry.extend_from_slice(&buf[..n]);
        let mut out: Vec<u8> = Vec::new();
        let mut start = 0;
        while let Some(nl) = carry[start..].iter().position(|b| *b == b'\n') {
            let end = start + nl + 1;
            out.extend_from_slice(&scrubber.line(&carry[start..end]));
            start = end;
        }
        carry.drain(..start);
        if carry.len() > MAX_LINE {
            // A line this long without a newline is written in pieces; a tail that could
            // begin a secret still waits (a word longer than the limit does not).
            let cut = match scrubber.safe_prefix(&carry) {
                0 => carry.len(),
                cut => cut,
            };
            out.extend_from_slice(&scrubber.line(&carry[..cut]));
            carry.drain(..cut);
        }
        if !out.is_empty() {
            let _ = file.write_all(&out);
        }
    }
    if !carry.is_empty() {
        let _ = file.write_all(&scrubber.line(&carry));
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_shapes_are_replaced_and_other_lines_pass_byte_for_byte() {
        let env: BTreeMap<String, String> = [
            (
                "DATABASE_URL",
                "postgres://bk_a:pw-of-the-slice-1@127.0.0.1:5/bk_a",
            ),
            ("API_TOKEN", "tok-123456"),
            ("MODE", "dev"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let values = values_for(&env, &["resolved-secret-value".into()]);
        let s = Scrubber::new(&values);
        let plain = b"GET /health 200 \xff\xfe binary ok\n";
        assert!(matches!(s.line(plain), Cow::Borrowed(_)));
        assert_eq!(s.line(plain).as_ref(), plain);
        let line = b"token tok-123456 and resolved-secret-value; db pw-of-the-slice-1\n";
        assert_eq!(
            String::from_utf8(s.line(line).into_owned()).unwrap(),
            "token [secret] and [secret]; db [secret]\n"
        );
        let shaped = b"key=AKIAIOSFODNN7EXAMPLE url postgres://u:hunter2@db/x\n";
        assert_eq!(
            String::from_utf8(s.line(shaped).into_owned()).unwrap(),
            "key=[secret] url postgres://u:[secret]@db/x\n"
        );
    }

    #[test]
    fn an_unfinished_line_is_written_only_up_to_what_cannot_begin_a_secret() {
        let s = Scrubber::new(&["canary-value-123".into(), "two words here".into()]);
        // A tail that may begin a secret value waits, at any length.
        assert_eq!(s.safe_prefix(b"split=canary-val"), b"split=".len());
        assert_eq!(s.safe_prefix(b"split=ca"), b"split=".len());
        // So does a last word that may begin a credential shape.
        assert_eq!(s.safe_prefix(b"key ghp_abc"), b"key ".len());
        assert_eq!(s.safe_prefix(b"url postgres://u:pa"), b"url ".len());
        assert_eq!(s.safe_prefix(b"id 0123456789abcdef"), b"id ".len());
        // A prompt or a progress line is written whole.
        assert_eq!(s.safe_prefix(b"Password: "), b"Password: ".len());
        assert_eq!(s.safe_prefix(b"Downloading 45%"), b"Downloading 45%".len());
        assert_eq!(
            s.safe_prefix(b"no newline at the end"),
            b"no newline at the end".len()
        );
        // A tail that may begin a value with spaces waits too.
        assert_eq!(s.safe_prefix(b"x two words "), b"x ".len());
        assert_eq!(s.safe_prefix(b"no secret here "), b"no secret here ".len());
    }
}
