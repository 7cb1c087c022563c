//! What differs between operating systems lives in one crate, `binky-platform` (platform/):
//! no other production file names `nix`, `libc`, `std::os::unix`, `std::os::windows`, `/proc`
//! or cgroups' files: a file that starts to fails this test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What only the platform crate may name.
const SYSTEM_WORDS: &[&str] = &[
    "nix::",
    "libc::",
    "std::os::unix",
    "std::os::windows",
    "\"/proc",
    "/sys/fs/cgroup",
    "cgroup.procs",
    "tokio::signal::unix",
    "UnixStream",
    "UnixListener",
    "windows_sys::",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with each line's comment left out (a `//` outside a string's quotes).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The production files (src/, controllers/src/, proxy/src/) that name a system word.
fn reaching_the_system(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for krate in ["src", "controllers/src", "proxy/src"] {
        rust_files(&root.join(krate), &mut files);
    }
    files
        .into_iter()
        .filter(|path| {
            let code = without_comments(&std::fs::read_to_string(path).unwrap());
            SYSTEM_WORDS.iter().any(|w| code.contains(w))
        })
        .map(|path| {
            path.strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect()
}

#[test]
fn only_the_platform_crate_reaches_the_system() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let found = reaching_the_system(&root);
    assert!(
        found.is_empty(),
        "these files reach the system directly: put what they need in platform/ (binky_platform) and call it: {found:?}"
    );
    // The platform crate itself is where these words belong (a check that the words match).
    let mut platform = Vec::new();
    rust_files(&root.join("platform/src"), &mut platform);
    assert!(
        platform.iter().any(|p| {
            let code = without_comments(&std::fs::read_to_string(p).unwrap());
            SYSTEM_WORDS.iter().any(|w| code.contains(w))
        }),
        "the words are never found, even in platform/: the test would pass on anything"
    );
}

#[test]
fn a_comment_naming_the_system_is_not_code_that_reaches_it() {
    assert_eq!(without_comments("let x = 1; // nix::unistd"), "let x = 1; ");
    assert_eq!(
        without_comments("let p = \"a//b\"; nix::unistd::getuid()"),
        "let p = \"a//b\"; nix::unistd::getuid()"
    );
}

/// A caller's variable that is no Unicode (bytes that are no UTF-8 on Unix, a lone surrogate
/// on Windows) is named and dropped from what a world's command gets, not passed on mangled.
#[test]
fn a_callers_variable_that_is_not_unicode_is_named_and_dropped() {
    use std::ffi::OsString;
    #[cfg(unix)]
    let (bad_value, bad_key) = {
        use std::os::unix::ffi::OsStringExt;
        (
            OsString::from_vec(vec![0xff]),
            OsString::from_vec(vec![b'K', 0xfe]),
        )
    };
    #[cfg(windows)]
    let (bad_value, bad_key) = {
        use std::os::windows::ffi::OsStringExt;
        (
            OsString::from_wide(&[0xD800]),
            OsString::from_wide(&[u16::from(b'K'), 0xDC00]),
        )
    };
    let vars = vec![
        (OsString::from("BAD"), bad_value),
        (bad_key, OsString::from("v")),
        (OsString::from("GOOD"), OsString::from("ok")),
    ];
    let (env, bad) = binky::caller_env::world_env(vars);
    assert_eq!(env.len(), 1);
    assert_eq!(bad, vec!["BAD".to_owned(), "K\u{fffd}".to_owned()]);
}
