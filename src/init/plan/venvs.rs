//! Merging: the project's own virtualenvs. A Python part with a git-ignored `.venv` (or
//! `venv`) runs its commands through the world's copy of it (`.venv/bin/fastapi`), and the
//! venv is one of the paths `[project] copy` brings into each world, so that no world runs
//! on a bare `python` (the shell's, whatever it is) or on the main checkout's venv.

use serde_yaml_ng::Value;

use super::Plan;
use crate::init::values::path_in;

impl Plan {
    /// Commands of process services (and of commented-out ones, for when they are
    /// uncommented) and `migrate` commands whose program is in the virtualenv of their
    /// directory (or of the nearest directory above it) run that venv's program, relative
    /// to their workdir; each venv used is in [`Plan::copy`].
    pub(in crate::init) fn use_venvs(&mut self) {
        if self.found.venvs.is_empty() {
            return;
        }
        for i in self.svcs.ids() {
            if !self.runs(i) {
                continue;
            }
            let workdir = self.svcs[i].workdir.clone();
            let Some(cmd) = self.svcs[i].def.get("command").cloned() else {
                continue;
            };
            let cmd = match cmd {
                Value::String(s) => Value::String(self.through_venv(workdir.as_deref(), &s)),
                Value::Sequence(mut ws) => {
                    if let Some(Value::String(first)) = ws.first_mut() {
                        *first = self.through_venv(workdir.as_deref(), first);
                    }
                    Value::Sequence(ws)
                }
                other => other,
            };
            self.svcs[i].def.insert(Value::from("command"), cmd);
        }
        let dbs: Vec<_> = self.migrations.keys().copied().collect();
        for db in dbs {
            let m = &self.migrations[&db];
            let (workdir, cmd, seed) = (m.workdir.clone(), m.cmd.clone(), m.seed.clone());
            let cmd = self.through_venv(workdir.as_deref(), &cmd);
            let seed = seed.map(|(s, from)| (self.through_venv(workdir.as_deref(), &s), from));
            if let Some(m) = self.migrations.get_mut(&db) {
                m.cmd = cmd;
                m.seed = seed;
            }
        }
    }

    /// `cmd` (run in `workdir`) with each program at a command's start (the first word,
    /// and the first after `&&`, `||`, `;` or `|`) that the venv of `workdir` has as that
    /// venv's (`.venv/bin/alembic upgrade head`); the venv goes into [`Plan::copy`] when
    /// one was.
    pub(in crate::init) fn through_venv(&mut self, workdir: Option<&str>, cmd: &str) -> String {
        let Some((venv, rel)) = self.venv_of(workdir) else {
            return cmd.to_owned();
        };
        let programs = self.found.venvs[&venv].clone();
        let mut out: Vec<String> = Vec::new();
        let mut at_start = true;
        let mut changed = false;
        for w in cmd.split(' ') {
            if at_start && !w.is_empty() && !w.contains('=') {
                if !w.contains('/') && programs.contains(w) {
                    out.push(format!("{rel}/bin/{w}"));
                    changed = true;
                } else {
                    out.push(w.to_owned());
                }
                at_start = false;
                continue;
            }
            at_start = at_start || matches!(w, "&&" | "||" | ";" | "|");
            out.push(w.to_owned());
        }
        if changed && !self.copy.contains(&venv) {
            self.copy.push(venv);
        }
        out.join(" ")
    }

    /// The venv of `workdir`: in it, else in the nearest directory above it, as `(its path
    /// in the project, its path relative to workdir)`.
    fn venv_of(&self, workdir: Option<&str>) -> Option<(String, String)> {
        let mut dir: Option<String> = workdir.map(str::to_owned).filter(|d| !d.is_empty());
        let mut up = 0usize;
        loop {
            for name in [".venv", "venv"] {
                let path = path_in(dir.as_deref(), name);
                if self.found.venvs.contains_key(&path) {
                    let rel = format!("{}{name}", "../".repeat(up));
                    return Some((path, rel));
                }
            }
            let d = dir?;
            dir = d.rsplit_once('/').map(|(parent, _)| parent.to_owned());
            up += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::init::plan::Plan;
    use crate::init::read::Findings;
    use crate::init::repo::{ComposeSource, Repo};

    fn plan(venvs: &[(&str, &[&str])]) -> Plan {
        let repo = Repo {
            dir_name: "shop".into(),
            compose: Some(ComposeSource {
                name: "compose.yaml".into(),
                text: "services:\n  api:\n    build: ./backend\n    command: serve\n".into(),
            }),
            venvs: venvs
                .iter()
                .map(|(d, ps)| {
                    let ps: BTreeSet<String> = ps.iter().map(|p| p.to_string()).collect();
                    (d.to_string(), ps)
                })
                .collect(),
            ..Repo::default()
        };
        Plan::merge(Findings::of(&repo).unwrap(), "shop").unwrap()
    }

    #[test]
    fn a_command_runs_the_programs_of_the_venv_of_its_directory_or_the_nearest_above() {
        let mut p = plan(&[("backend/.venv", &["python", "fastapi", "alembic"])]);
        assert_eq!(
            p.through_venv(Some("backend"), "fastapi run --workers 4"),
            ".venv/bin/fastapi run --workers 4"
        );
        assert_eq!(
            p.through_venv(
                Some("backend/app"),
                "alembic upgrade head && python app/seed.py"
            ),
            "../.venv/bin/alembic upgrade head && ../.venv/bin/python app/seed.py"
        );
        assert_eq!(p.copy, ["backend/.venv"]);
        // A program the venv does not have, a path, a variable: as written.
        assert_eq!(
            p.through_venv(Some("backend"), "DEBUG=1 bash scripts/start.sh"),
            "DEBUG=1 bash scripts/start.sh"
        );
        assert_eq!(
            p.through_venv(Some("backend"), "/usr/bin/python x.py"),
            "/usr/bin/python x.py"
        );
        // No venv at or above the directory: nothing changes, nothing is copied.
        let mut none = plan(&[("backend/.venv", &["python"])]);
        assert_eq!(none.through_venv(Some("frontend"), "python x"), "python x");
        assert_eq!(none.through_venv(None, "python x"), "python x");
        assert!(none.copy.is_empty());
        let mut top = plan(&[(".venv", &["uvicorn"])]);
        assert_eq!(
            top.through_venv(Some("services/api"), "uvicorn app:app"),
            "../../.venv/bin/uvicorn app:app"
        );
        assert_eq!(top.copy, [".venv"]);
    }
}
