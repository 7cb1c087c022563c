//! Reading step: every `package.json` of the project to what it runs (a Vite or Next.js dev
//! server, a Node app's `dev`/`start` and worker scripts) and what it depends on.

use std::collections::{BTreeMap, BTreeSet};

use crate::init::repo::{config_in, file_in};

/// What one `package.json` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) struct Package {
    /// The package's directory (`None`: the top).
    pub(in crate::init) dir: Option<String>,
    /// Its Vite or Next.js dev server, when its `dev` script runs one.
    pub(in crate::init) dev_server: Option<DevServer>,
    /// It as a Node app run by its scripts, when it has a `dev` or `start` script.
    pub(in crate::init) node_app: Option<NodeApp>,
    /// Its `dependencies` and `devDependencies`, lower-case.
    pub(in crate::init) deps: BTreeSet<String>,
}

/// The project's packages, in the order of their paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::init) struct Packages(pub(in crate::init) Vec<Package>);

impl Packages {
    /// The package in `dir` (`None`: the top), if there is one.
    pub(in crate::init) fn get(&self, dir: Option<&str>) -> Option<&Package> {
        self.0.iter().find(|p| p.dir.as_deref() == dir)
    }

    /// The dev server of the package in `dir`, if it has one.
    pub(in crate::init) fn dev_server(&self, dir: Option<&str>) -> Option<&DevServer> {
        self.get(dir)?.dev_server.as_ref()
    }
}

/// Read every `package.json` of `files` (paths relative to the project → text), with the
/// files beside it that say how it runs (`vite.config.*`, `next.config.*`,
/// `pnpm-lock.yaml`).
pub(in crate::init) fn read(files: &BTreeMap<String, String>) -> Packages {
    Packages(
        files
            .iter()
            .filter(|(p, _)| p.rsplit('/').next() == Some("package.json"))
            .map(|(p, text)| {
                let dir = p.rsplit_once('/').map(|(d, _)| d.to_owned());
                let json = serde_json::from_str::<serde_json::Value>(text).ok();
                let mut deps = BTreeSet::new();
                for table in ["dependencies", "devDependencies"] {
                    if let Some(m) = json.as_ref().and_then(|j| j.get(table)?.as_object()) {
                        deps.extend(m.keys().map(|k| k.to_ascii_lowercase()));
                    }
                }
                let manager = if file_in(files, dir.as_deref(), "pnpm-lock.yaml").is_some() {
                    "pnpm"
                } else {
                    "npm"
                };
                Package {
                    dev_server: json
                        .as_ref()
                        .and_then(|j| dev_server(files, dir.as_deref(), j, manager)),
                    node_app: json
                        .as_ref()
                        .and_then(|j| node_app(dir.clone(), j, manager)),
                    dir,
                    deps,
                }
            })
            .collect(),
    )
}

/// A JavaScript dev server a `package.json` runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) struct DevServer {
    /// `vite`, `next`, or another script's first word.
    pub(in crate::init) framework: &'static str,
    /// The package's directory (`None`: the top).
    pub(in crate::init) dir: Option<String>,
    /// The host command, listening on `${self.port}`.
    pub(in crate::init) cmd: String,
    /// What a person should know (Vite's host check).
    pub(in crate::init) note: Option<String>,
    /// The package manager the lock file says (`npm`, `pnpm`, `yarn`, `bun`).
    pub(in crate::init) manager: &'static str,
}

/// The dev server of the package in `dir`, if its `dev` script runs Vite or Next.js.
fn dev_server(
    files: &BTreeMap<String, String>,
    dir: Option<&str>,
    json: &serde_json::Value,
    manager: &'static str,
) -> Option<DevServer> {
    let scripts = json.get("scripts")?.as_object()?;
    let dev = scripts.get("dev").and_then(|s| s.as_str()).unwrap_or("");
    let has_vite = config_in(files, dir, "vite.config").is_some() || dev.contains("vite");
    let has_next = config_in(files, dir, "next.config").is_some() || dev.contains("next ");
    let run = |script: &str| -> String {
        if manager == "npm" {
            format!("npm run {script} --")
        } else {
            format!("{manager} run {script}")
        }
    };
    if dev.is_empty() {
        return None;
    }
    let words: Vec<&str> = dev.split_whitespace().collect();
    if has_vite && (words.contains(&"vite") || words.first() == Some(&"vite")) {
        let config = config_in(files, dir, "vite.config")
            .unwrap_or_else(|| crate::init::values::path_in(dir, "vite.config.ts"));
        return Some(DevServer {
            framework: "vite",
            dir: dir.map(str::to_owned),
            cmd: format!(
                "{} --port ${{self.port}} --strictPort --host 127.0.0.1",
                run("dev")
            ),
            note: Some(format!("Vite ({config}) refuses unknown hosts: set `server: {{ allowedHosts: [\".localhost\"] }}` in {config}")),
            manager,
        });
    }
    if has_next && words.contains(&"next") {
        return Some(DevServer {
            framework: "next",
            dir: dir.map(str::to_owned),
            cmd: format!("{} -p ${{self.port}} -H 127.0.0.1", run("dev")),
            note: None,
            manager,
        });
    }
    None
}

/// A Node app's scripts: which one serves (`dev`, else `start`) and the worker's, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) struct NodeApp {
    /// The package's directory (`None`: the top).
    pub(in crate::init) dir: Option<String>,
    /// The package manager the lock file says.
    pub(in crate::init) manager: &'static str,
    /// The script that serves.
    pub(in crate::init) web: String,
    /// The worker's script, if any.
    pub(in crate::init) worker: Option<String>,
}

impl NodeApp {
    /// The command that runs `script`.
    pub(in crate::init) fn run(&self, script: &str) -> String {
        format!("{} run {script}", self.manager)
    }
}

/// The package in `dir` as a Node app: its `dev` (else `start`) script serves, a `worker`
/// script is a service beside it. `None` without either.
fn node_app(
    dir: Option<String>,
    json: &serde_json::Value,
    manager: &'static str,
) -> Option<NodeApp> {
    let scripts = json.get("scripts")?.as_object()?;
    let web = ["dev", "start"]
        .into_iter()
        .find(|s| scripts.get(*s).and_then(|v| v.as_str()).is_some())?;
    let worker = ["worker", "work", "jobs", "queue"]
        .into_iter()
        .find(|s| scripts.get(*s).and_then(|v| v.as_str()).is_some());
    Some(NodeApp {
        dir,
        manager,
        web: web.to_owned(),
        worker: worker.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::init::read::files;

    #[test]
    fn a_vite_dev_script_is_a_dev_server_on_binkys_port_with_the_host_note() {
        let p = read(&files(&[
            (
                "web/package.json",
                r#"{"scripts":{"dev":"vite"},"devDependencies":{"Vite":"5"}}"#,
            ),
            ("web/vite.config.ts", "export default {}"),
        ]));
        let ds = p.dev_server(Some("web")).expect("a dev server");
        assert_eq!(ds.framework, "vite");
        assert_eq!(
            ds.cmd,
            "npm run dev -- --port ${self.port} --strictPort --host 127.0.0.1"
        );
        assert!(
            ds.note
                .as_deref()
                .is_some_and(|n| n.contains("web/vite.config.ts")),
            "{ds:?}"
        );
        assert!(p.get(Some("web")).unwrap().deps.contains("vite"));
        assert_eq!(p.dev_server(None), None, "no package at the top");
    }

    #[test]
    fn next_with_pnpm_runs_through_pnpm() {
        let p = read(&files(&[
            ("package.json", r#"{"scripts":{"dev":"next dev"}}"#),
            ("pnpm-lock.yaml", ""),
        ]));
        let ds = p.dev_server(None).expect("a dev server");
        assert_eq!((ds.framework, ds.manager), ("next", "pnpm"));
        assert_eq!(ds.cmd, "pnpm run dev -p ${self.port} -H 127.0.0.1");
    }

    #[test]
    fn a_node_app_serves_dev_else_start_with_its_worker_beside() {
        let p = read(&files(&[(
            "api/package.json",
            r#"{"scripts":{"start":"node server.js","worker":"node worker.js"},"dependencies":{"pg":"8"}}"#,
        )]));
        let pkg = p.get(Some("api")).unwrap();
        assert_eq!(pkg.dev_server, None, "node is no dev server");
        let app = pkg.node_app.as_ref().expect("a node app");
        assert_eq!(
            (app.web.as_str(), app.worker.as_deref()),
            ("start", Some("worker"))
        );
        assert_eq!(app.run("start"), "npm run start");
        assert!(pkg.deps.contains("pg"));
    }

    #[test]
    fn a_package_json_that_does_not_parse_runs_nothing_and_names_no_dependency() {
        let p = read(&files(&[("package.json", "{ \"scripts\": ")]));
        let pkg = p.get(None).expect("still listed");
        assert_eq!((&pkg.dev_server, &pkg.node_app), (&None, &None));
        assert!(pkg.deps.is_empty());
    }
}
