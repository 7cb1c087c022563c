//! The README's example (examples/hello) works as the README says.

use crate::harness::*;

#[test]
fn the_hello_example_comes_up_and_web_reaches_api() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello");
    let toml = std::fs::read_to_string(dir.join("binky.toml")).unwrap();
    let env = Env::new(&toml);
    for f in ["api.py", "web.py"] {
        std::fs::copy(dir.join(f), env.repo.join(f)).unwrap();
    }
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "example"]);
    let check = env.ok(&["check"]);
    assert!(check.contains(": ok"), "{check}");
    let out = env.binky(&["up", "demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = env.ok(&["curl", "demo", "web", "/"]);
    assert!(
        page.contains("hello from demo") && page.contains("api says"),
        "{page}"
    );
    env.ok(&["remove", "demo"]);
    env.assert_nothing_left(&["demo"]);
}
