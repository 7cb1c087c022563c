//! Writing TOML and comment text: every key and value through `toml_edit` (the lines and
//! comments around them are laid out by [`super::write`]).

use super::label_or_app;
use super::secrets::literal_part;

/// A TOML string, as `toml_edit` writes it (a basic string, or a literal one when that
/// reads better: `'psql "$DATABASE_URL"'`).
pub(in crate::init) fn q(s: &str) -> String {
    toml_edit::Value::from(s).to_string().trim().to_owned()
}

/// A TOML key, as `toml_edit` writes it: bare when it can be, quoted otherwise.
pub(in crate::init) fn toml_key(k: &str) -> String {
    toml_edit::Key::new(k).to_string().trim().to_owned()
}

/// A TOML array of strings, as `toml_edit` writes it.
pub(in crate::init) fn toml_list(items: &[String]) -> String {
    let array: toml_edit::Array = items.iter().map(String::as_str).collect();
    let mut v = toml_edit::Value::Array(array);
    v.decor_mut().clear();
    v.to_string().trim().to_owned()
}

/// One comment line's worth of text.
pub(in crate::init) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A shell word, quoted only when it must be (`${svc.port}` references are fine bare:
/// binky replaces them before the shell sees the command).
pub(in crate::init) fn shell_word(w: &str) -> String {
    let plain = literal_part(w);
    if !w.is_empty()
        && plain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c))
    {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// A hostname label for a name: lower-case letters and digits, `-` for anything else (one
/// `-` a character: `a__b` is `a--b`).
pub(in crate::init) fn dns_label(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    label_or_app(&out)
}
