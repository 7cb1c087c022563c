//! The keys that change a world (`u`, `d`, `r`) run the CLI itself: `binky up|down|reload
//! NAME --no-wait`, from the world's directory, as a person would type it in a shell there.
//! The same admission, the same refusals (a shared world is not brought down by hand), the
//! same desired state; the table then shows the world converge. Nothing here waits for the
//! world: the command returns once the desired state is written, so no `binky` process is
//! left behind when `top` quits.

use std::path::PathBuf;
use std::process::Stdio;

use tokio::sync::mpsc;

use super::model::WorldLine;

/// What a key asks of a world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    Up,
    Down,
    Reload,
}

impl Verb {
    /// The command's name.
    pub fn command(self) -> &'static str {
        match self {
            Verb::Up => "up",
            Verb::Down => "down",
            Verb::Reload => "reload",
        }
    }
}

/// How a command went.
pub(super) struct Done {
    /// `binky down login-fix`.
    pub command: String,
    pub ok: bool,
    /// What it said (its error, when it failed).
    pub said: String,
}

/// The arguments of `binky VERB` for `world`.
pub(super) fn args(verb: Verb, world: &WorldLine) -> Vec<String> {
    let mut args = vec![verb.command().to_owned(), world.target.world.clone()];
    // `binky up` writes the whole desired record: keep the group it was brought up with.
    if let (Verb::Up, Some(g)) = (verb, &world.group) {
        args.extend(["--group".to_owned(), g.clone()]);
    }
    args.push("--no-wait".to_owned());
    args
}

/// Run `binky VERB NAME --no-wait` in the background; its outcome comes on `done`. (`top`
/// waits for these before it exits: killed half-way, a command might not have written.)
pub(super) fn start(
    exe: PathBuf,
    verb: Verb,
    world: &WorldLine,
    done: mpsc::UnboundedSender<Done>,
) {
    let args = args(verb, world);
    let dir = world.dir.clone();
    let command = format!("binky {}", args[..2].join(" "));
    // `down requested`, not `beta: down requested` after `binky down beta:`.
    let own = format!("{}: ", world.target.world);
    tokio::spawn(async move {
        let out = tokio::process::Command::new(&exe)
            .args(&args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .await;
        let (ok, said) = match out {
            Ok(o) => {
                let stdout = String::from_utf8_lossy(&o.stdout);
                let stderr = String::from_utf8_lossy(&o.stderr);
                let said = if o.status.success() {
                    stdout.lines().rfind(|l| !l.trim().is_empty())
                } else {
                    stderr
                        .lines()
                        .find(|l| !l.trim().is_empty() && !l.starts_with("binky: warning"))
                };
                (o.status.success(), strip(said.unwrap_or(""), &own))
            }
            Err(e) => (false, format!("cannot run {}: {e}", exe.display())),
        };
        let _ = done.send(Done { command, ok, said });
    });
}

/// What a command said, without `binky: ` and the world's name in front.
fn strip(said: &str, own: &str) -> String {
    let said = said.trim_start_matches("binky: ");
    said.strip_prefix(own).unwrap_or(said).to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::model::Target;
    use super::*;

    fn world(group: Option<&str>) -> WorldLine {
        WorldLine {
            target: Target {
                project: "acme".into(),
                world: "login-fix".into(),
                service: None,
            },
            state: "stopped".into(),
            usage: None,
            restarts: 0,
            info: String::new(),
            attention: false,
            dir: PathBuf::from("/tmp"),
            group: group.map(str::to_owned),
        }
    }

    #[test]
    fn up_keeps_the_group_and_nothing_waits() {
        assert_eq!(
            args(Verb::Up, &world(Some("web"))),
            ["up", "login-fix", "--group", "web", "--no-wait"]
        );
        assert_eq!(
            args(Verb::Down, &world(Some("web"))),
            ["down", "login-fix", "--no-wait"]
        );
        assert_eq!(
            args(Verb::Reload, &world(None)),
            ["reload", "login-fix", "--no-wait"]
        );
    }
}
