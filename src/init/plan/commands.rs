//! Merging: where each process's code is (build context, Dockerfile `WORKDIR`, a mounted
//! `working_dir`) and the command compose does not give (a start script the image runs, a
//! Vite or Next.js dev server, the Dockerfile's `CMD`), and dev servers no compose service
//! runs.

use serde_yaml_ng::{Mapping, Value};

use super::{Kind, Plan, SvcId};
use crate::init::images::image_only_command;
use crate::init::read::dockerfile::{script_command, Build, Dockerfile};
use crate::init::values::{
    as_named_mapping, command_of, is_project_path, literal, normalise, read_by_browser, scalar,
    volumes, Command, Dir,
};

impl Plan {
    /// Each process service's `workdir`.
    pub(in crate::init) fn plan_workdirs(&mut self) {
        for i in self.svcs.ids() {
            if self.runs(i) {
                self.svcs[i].workdir = self.workdir(i);
            }
        }
    }

    pub(in crate::init) fn workdir(&mut self, i: SvcId) -> Option<String> {
        let def = self.svcs[i].def.clone();
        let name = self.svcs[i].name.clone();
        let working_dir = def
            .get("working_dir")
            .and_then(scalar)
            .map(|w| self.interpolate(&w));
        let mut chosen: Option<(String, Dir)> = None;
        if let Some(w) = &working_dir {
            if !w.starts_with('/') {
                chosen = Some((w.clone(), normalise(w)));
            } else {
                // `working_dir: /app` with `./web:/app` mounted: the code is in ./web.
                for (src, dst) in volumes(&def) {
                    let dst = dst.trim_end_matches('/');
                    if let Some(rest) = w.strip_prefix(dst) {
                        if (rest.is_empty() || rest.starts_with('/')) && is_project_path(&src) {
                            let path = format!("{src}{rest}");
                            chosen = Some((path.clone(), normalise(&path)));
                            break;
                        }
                    }
                }
            }
        }
        if chosen.is_none() {
            // The Dockerfile's WORKDIR, where a COPY maps it into the project.
            if let Some(build) = Build::of(&def) {
                let df = build.dockerfile(&self.found.files);
                if let Some(host) = df
                    .as_ref()
                    .and_then(|df| df.host_path(&build.context, df.workdir.as_deref()?))
                {
                    if !host.is_empty() && host != build.context {
                        chosen = Some((host.clone(), normalise(&host)));
                    }
                }
            }
        }
        if chosen.is_none() {
            let context = match def.get("build") {
                Some(Value::Mapping(m)) => Some(
                    m.get("context")
                        .and_then(scalar)
                        .unwrap_or_else(|| ".".into()),
                ),
                Some(v) => scalar(v),
                None => None,
            }
            .map(|c| self.interpolate(&c));
            if let Some(c) = context {
                if !c.contains("://") && !c.starts_with("git@") && !c.starts_with('/') {
                    chosen = Some((c.clone(), normalise(&c)));
                }
            }
        }
        match chosen {
            Some((_, Dir::Below(d))) => Some(d),
            Some((path, Dir::Outside)) => {
                self.todo(format!("{name}: its code is in {path}, outside this directory: set `workdir` (relative to binky.toml) if it should run there"));
                None
            }
            Some((_, Dir::Here)) => None,
            None => {
                if let Some(w) = working_dir {
                    self.todo(format!("{name}: working_dir {w} is a path inside the container: set `workdir` (relative to binky.toml) if {name} runs elsewhere than here"));
                }
                None
            }
        }
    }

    /// A command for each process service compose gives none it can use for: the start
    /// script an image path names (`/start` copied from `compose/local/django/start`), the
    /// `dev` script of a Vite or Next.js `package.json` in its directory, or the
    /// Dockerfile's `CMD`.
    pub(in crate::init) fn derive_commands(&mut self) {
        for i in self.svcs.ids() {
            if self.svcs[i].kind != Kind::Process {
                continue;
            }
            let def = self.svcs[i].def.clone();
            let compose_cmd = match command_of(&def) {
                Some(Command::Shell(s)) => Some(s),
                Some(Command::Words(ws)) => Some(ws.join(" ")),
                None => None,
            };
            if compose_cmd
                .as_deref()
                .is_some_and(|c| image_only_command(c).is_none())
            {
                continue;
            }
            let build = Build::of(&def);
            let df = build.as_ref().and_then(|b| b.dockerfile(&self.found.files));
            let workdir = self.svcs[i].workdir.clone();
            let found: Option<(String, String)> = match &compose_cmd {
                Some(c) => self.script_of(build.as_ref(), df.as_ref(), c),
                None => {
                    let dev = self.found.packages.dev_server(workdir.as_deref()).cloned();
                    if let Some(ds) = dev {
                        if let Some(note) = &ds.note {
                            self.note(note);
                        }
                        if !def.contains_key("ports") && !def.contains_key("expose") {
                            let port = if ds.framework == "vite" { 5173 } else { 3000 };
                            self.svcs[i].def.insert(
                                Value::from("expose"),
                                Value::Sequence(vec![Value::from(port.to_string())]),
                            );
                        }
                        // Build arguments the bundle reads (`VITE_API_URL`) are the dev
                        // server's environment.
                        let args = def
                            .get("build")
                            .and_then(|b| b.get("args"))
                            .cloned()
                            .map(as_named_mapping);
                        if let Some(Value::Mapping(args)) = args {
                            let mut env =
                                match def.get("environment").cloned().map(as_named_mapping) {
                                    Some(Value::Mapping(m)) => m,
                                    _ => Mapping::new(),
                                };
                            for (k, v) in args {
                                let browser = scalar(&k).is_some_and(|k| read_by_browser(&k));
                                if browser && !env.contains_key(&k) {
                                    env.insert(k, v);
                                }
                            }
                            self.svcs[i]
                                .def
                                .insert(Value::from("environment"), Value::Mapping(env));
                        }
                        let pkg = crate::init::values::path_in(workdir.as_deref(), "package.json");
                        Some((
                            ds.cmd,
                            format!("the dev script of {pkg} ({})", ds.framework),
                        ))
                    } else {
                        self.dockerfile_cmd(build.as_ref(), df.as_ref())
                    }
                }
            };
            if let Some((cmd, from)) = found {
                self.svcs[i]
                    .def
                    .insert(Value::from("command"), Value::from(literal(&cmd)));
                self.svcs[i].cmd_from = Some(from);
            }
        }
    }

    /// The command of the start script an image path names, through the Dockerfile's
    /// `COPY`: `(command, where it came from)`.
    fn script_of(
        &self,
        build: Option<&Build>,
        df: Option<&Dockerfile>,
        cmd: &str,
    ) -> Option<(String, String)> {
        let first = cmd.split_whitespace().next()?;
        if !first.starts_with('/') {
            return None;
        }
        let host = df?.host_path(&build?.context, first)?;
        let text = self.found.files.get(&host)?;
        let line = script_command(text)?;
        // A script that runs another image path is no command for the host.
        if image_only_command(&line).is_some() {
            return None;
        }
        Some((line, format!("{host}, the script compose runs as {first}")))
    }

    /// The Dockerfile's `CMD`, unless it serves built files (nginx, Caddy, httpd) or is a
    /// path inside the image with no script behind it.
    fn dockerfile_cmd(
        &self,
        build: Option<&Build>,
        df: Option<&Dockerfile>,
    ) -> Option<(String, String)> {
        let cmd = df?.cmd.clone()?;
        let program = cmd
            .split_whitespace()
            .next()?
            .rsplit('/')
            .next()?
            .to_owned();
        if matches!(
            program.as_str(),
            "nginx" | "caddy" | "httpd" | "httpd-foreground" | "apache2-foreground"
        ) {
            return None;
        }
        if image_only_command(&cmd).is_some() {
            return self.script_of(build, df, &cmd);
        }
        let path = build?.dockerfile_path()?;
        // A server that listens on its own default port (`fastapi run`: 8000) is given it,
        // so that the port, written as `${self.port}`, is binky's.
        Some((
            super::bare::listen_on_port(&cmd),
            format!("the CMD of {path}"),
        ))
    }

    /// A service for each Vite or Next.js dev server of the project that no compose
    /// service runs (compose files often leave the frontend's dev server out).
    pub(in crate::init) fn add_dev_servers(&mut self) {
        let dirs: Vec<Option<String>> = self
            .found
            .packages
            .0
            .iter()
            .map(|p| p.dir.clone())
            .collect();
        for dir in dirs {
            let covered = self
                .svcs
                .ids()
                .any(|i| self.runs(i) && self.svcs[i].workdir == dir);
            if covered {
                continue;
            }
            let Some(ds) = self.found.packages.dev_server(dir.as_deref()).cloned() else {
                continue;
            };
            if let Some(note) = &ds.note {
                self.note(note);
            }
            let base = dir
                .as_deref()
                .and_then(|d| d.rsplit('/').next())
                .unwrap_or("web")
                .to_owned();
            let port = if ds.framework == "vite" { 5173 } else { 3000 };
            let mut def = Mapping::new();
            def.insert(Value::from("command"), Value::from(literal(&ds.cmd)));
            // Published as the dev server serves it outside containers (`localhost:5173`):
            // that address in another service's settings (a CORS origin, `FRONTEND_HOST`)
            // is this service, and becomes its proxy URL.
            def.insert(
                Value::from("ports"),
                Value::Sequence(vec![Value::from(format!("{port}:{port}"))]),
            );
            // A frontend built only inside another service's image (a stage that copies
            // its directory): the build arguments the browser reads (`VITE_API_URL`) are
            // the dev server's env, pointing at that service through the proxy.
            if let Some(d) = dir.as_deref() {
                let mut env = Mapping::new();
                for i in self.svcs.ids() {
                    if self.svcs[i].kind != Kind::Process {
                        continue;
                    }
                    let Some(build) = Build::of(&self.svcs[i].def) else {
                        continue;
                    };
                    let target = self.svcs[i].name.clone();
                    for arg in build.args_of_stages_copying(&self.found.files, d) {
                        if read_by_browser(&arg) && !env.contains_key(arg.as_str()) {
                            let token = format!("${{{target}.proxy_url}}");
                            env.insert(Value::from(arg), Value::from(literal(&token)));
                        }
                    }
                }
                if !env.is_empty() {
                    def.insert(Value::from("environment"), Value::Mapping(env));
                }
            }
            let pkg = crate::init::values::path_in(dir.as_deref(), "package.json");
            let from = format!("the dev script of {pkg} ({})", ds.framework);
            self.push_svc(&base, def, Kind::Process, dir, Some(from));
        }
    }
}
