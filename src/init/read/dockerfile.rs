//! Reading step: a compose service's `build:` to the Dockerfile it builds, a Dockerfile's
//! stage to where its code is and what it runs (`WORKDIR`, `COPY`, `CMD`), and a start
//! script to the command it ends with.

use std::collections::BTreeMap;

use serde_yaml_ng::{Mapping, Value};

use crate::init::values::{normalise, scalar, Dir};

/// A compose service's `build:`, as far as the host is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) struct Build {
    /// The context, relative to the project and normalised (`""` for the project itself).
    pub(in crate::init) context: String,
    /// The Dockerfile, relative to the context as compose reads it.
    pub(in crate::init) dockerfile: String,
    /// `build.target`: the stage built.
    pub(in crate::init) target: Option<String>,
}

impl Build {
    /// `build:` of a service whose context is in the project; `None` otherwise.
    pub(in crate::init) fn of(def: &Mapping) -> Option<Build> {
        let (context, dockerfile, target) = match def.get("build")? {
            Value::Mapping(m) => (
                m.get("context")
                    .and_then(scalar)
                    .unwrap_or_else(|| ".".into()),
                m.get("dockerfile")
                    .and_then(scalar)
                    .unwrap_or_else(|| "Dockerfile".into()),
                m.get("target").and_then(scalar),
            ),
            v => (scalar(v)?, "Dockerfile".to_owned(), None),
        };
        if context.contains("://") || context.starts_with("git@") || context.contains('$') {
            return None;
        }
        let context = match normalise(&context) {
            Dir::Here => String::new(),
            Dir::Below(d) => d,
            Dir::Outside => return None,
        };
        Some(Build {
            context,
            dockerfile,
            target,
        })
    }

    /// The Dockerfile's path in the project.
    pub(in crate::init) fn dockerfile_path(&self) -> Option<String> {
        match normalise(&crate::init::values::path_in(
            Some(&self.context),
            &self.dockerfile,
        )) {
            Dir::Below(p) => Some(p),
            _ => None,
        }
    }

    /// The Dockerfile, read from the project's `files`, for its build target.
    pub(in crate::init) fn dockerfile(
        &self,
        files: &BTreeMap<String, String>,
    ) -> Option<Dockerfile> {
        let text = files.get(&self.dockerfile_path()?)?;
        Some(Dockerfile::parse(text, self.target.as_deref()))
    }

    /// The build arguments (`ARG VITE_API_URL=`) of the Dockerfile's stages that copy the
    /// project's directory `dir` (`COPY ./frontend /app/frontend`): what a frontend built
    /// only inside this image reads at build time, each once.
    pub(in crate::init) fn args_of_stages_copying(
        &self,
        files: &BTreeMap<String, String>,
        dir: &str,
    ) -> Vec<String> {
        let Some(text) = self.dockerfile_path().and_then(|p| files.get(&p)) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        let mut args: Vec<String> = Vec::new();
        let mut copies_dir = false;
        let mut end_stage = |args: &mut Vec<String>, copies: &mut bool| {
            if *copies {
                for a in args.iter() {
                    if !out.contains(a) {
                        out.push(a.clone());
                    }
                }
            }
            args.clear();
            *copies = false;
        };
        for line in text.lines() {
            let t = line.trim();
            let (word, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
            match word.to_ascii_uppercase().as_str() {
                "FROM" => end_stage(&mut args, &mut copies_dir),
                "ARG" => {
                    let name = rest.trim().split('=').next().unwrap_or("").trim();
                    if !name.is_empty() {
                        args.push(name.to_owned());
                    }
                }
                "COPY" | "ADD" => {
                    let mut words = exec_words(rest);
                    if words.iter().any(|w| w.starts_with("--from")) {
                        continue;
                    }
                    words.retain(|w| !w.starts_with("--"));
                    words.pop();
                    copies_dir |= words.iter().any(|src| {
                        match normalise(&crate::init::values::path_in(Some(&self.context), src)) {
                            Dir::Below(p) => p == dir || p.starts_with(&format!("{dir}/")),
                            _ => false,
                        }
                    });
                }
                _ => {}
            }
        }
        end_stage(&mut args, &mut copies_dir);
        out
    }
}

/// What a Dockerfile's stage says about where the code is and what runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::init) struct Dockerfile {
    /// The last `WORKDIR` (absolute).
    pub(in crate::init) workdir: Option<String>,
    /// `COPY`/`ADD` from the build context: `(source, absolute destination)`.
    pub(in crate::init) copies: Vec<(String, String)>,
    /// `CMD`, as one shell text.
    pub(in crate::init) cmd: Option<String>,
    /// `ENTRYPOINT`, as one shell text.
    pub(in crate::init) entrypoint: Option<String>,
}

impl Dockerfile {
    /// The stage named `target`, else the last one.
    pub(in crate::init) fn parse(text: &str, target: Option<&str>) -> Dockerfile {
        // Instructions, continuation lines joined.
        let mut instructions: Vec<String> = Vec::new();
        let mut cur = String::new();
        for line in text.lines() {
            let t = line.trim();
            if cur.is_empty() && (t.starts_with('#') || t.is_empty()) {
                continue;
            }
            match t.strip_suffix('\\') {
                Some(part) => {
                    cur.push_str(part);
                    cur.push(' ');
                }
                None => {
                    if !t.starts_with('#') {
                        cur.push_str(t);
                    }
                    instructions.push(std::mem::take(&mut cur));
                }
            }
        }
        if !cur.is_empty() {
            instructions.push(cur);
        }
        // `(stage name, its instructions as (word, rest))`.
        type Stage = (Option<String>, Vec<(String, String)>);
        let mut stages: Vec<Stage> = Vec::new();
        for ins in instructions {
            let (word, rest) = ins.split_once(char::is_whitespace).unwrap_or((&ins, ""));
            let word = word.to_ascii_uppercase();
            let rest = rest.trim().to_owned();
            if word == "FROM" {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let name = words
                    .iter()
                    .position(|w| w.eq_ignore_ascii_case("as"))
                    .and_then(|i| words.get(i + 1))
                    .map(|s| s.to_string());
                stages.push((name, Vec::new()));
            } else if let Some(stage) = stages.last_mut() {
                stage.1.push((word, rest));
            }
        }
        let stage = target
            .and_then(|t| stages.iter().find(|(n, _)| n.as_deref() == Some(t)))
            .or_else(|| stages.last());
        let mut df = Dockerfile::default();
        let Some((_, lines)) = stage else { return df };
        let mut wd = "/".to_owned();
        for (word, rest) in lines {
            match word.as_str() {
                "WORKDIR" => {
                    wd = absolute(&wd, rest.trim_matches('"'));
                    df.workdir = Some(wd.clone());
                }
                "COPY" | "ADD" => {
                    let mut args = exec_words(rest);
                    if args.iter().any(|a| a.starts_with("--from")) {
                        continue;
                    }
                    args.retain(|a| !a.starts_with("--"));
                    if let Some(dst) = args.pop() {
                        let dst_abs = absolute(&wd, &dst);
                        let dst_abs = if dst.ends_with('/') && args.len() == 1 {
                            // `COPY start.sh /usr/bin/` puts it at /usr/bin/start.sh
                            // when it is a file; a directory's contents go in.
                            format!("{}/", dst_abs.trim_end_matches('/'))
                        } else {
                            dst_abs
                        };
                        for src in args {
                            df.copies.push((src, dst_abs.clone()));
                        }
                    }
                }
                "CMD" => df.cmd = Some(exec_words(rest).join(" ")),
                "ENTRYPOINT" => df.entrypoint = Some(exec_words(rest).join(" ")),
                _ => {}
            }
        }
        df
    }

    pub(in crate::init) fn cmd_first_word(&self) -> Option<String> {
        self.cmd
            .as_deref()
            .and_then(|c| c.split_whitespace().next())
            .map(str::to_owned)
    }

    /// Where a path inside the image came from in the project, through the `COPY`s (the
    /// last one that covers it wins), relative to the project.
    pub(in crate::init) fn host_path(&self, context: &str, path: &str) -> Option<String> {
        let path = path.trim_end_matches('/');
        for (src, dst) in self.copies.iter().rev() {
            if src.contains(['*', '?', '$']) {
                continue;
            }
            let src_name = src.trim_end_matches('/').rsplit('/').next().unwrap_or(src);
            let found = if let Some(dir) = dst.strip_suffix('/') {
                // Into a directory: a file keeps its name; a directory's contents go in.
                if path == format!("{dir}/{src_name}") {
                    Some(src.clone())
                } else {
                    path.strip_prefix(&format!("{dir}/"))
                        .map(|rest| format!("{src}/{rest}"))
                        .or_else(|| {
                            // The directory itself: only when a directory was copied in.
                            let whole = matches!(src.as_str(), "." | "./") || src.ends_with('/');
                            (whole && path == dir).then(|| src.clone())
                        })
                }
            } else if path == dst {
                Some(src.clone())
            } else {
                path.strip_prefix(&format!("{dst}/"))
                    .map(|rest| format!("{src}/{rest}"))
            };
            if let Some(rel) = found {
                return in_context(context, &rel);
            }
        }
        self.parent_of_copy(context, path)
    }

    /// `path` as the directory of something copied into it under its own name: `COPY
    /// ./backend/app /app/backend/app` (or `COPY ./backend/alembic.ini /app/backend/`)
    /// says `/app/backend` is `backend`. Only a source with a directory of its own counts:
    /// `COPY ./alembic.ini /srv/` says nothing of where `/srv` is.
    fn parent_of_copy(&self, context: &str, path: &str) -> Option<String> {
        for (src, dst) in self.copies.iter().rev() {
            if src.contains(['*', '?', '$']) {
                continue;
            }
            let src = src.trim_end_matches('/');
            let Some((parent, name)) = src.rsplit_once('/') else {
                continue;
            };
            let at = match dst.strip_suffix('/') {
                Some(dir) => format!("{dir}/{name}"),
                None => dst.clone(),
            };
            if at == format!("{path}/{name}") && !matches!(parent, "" | ".") {
                return in_context(context, parent);
            }
        }
        None
    }
}

/// `rel` (a path of the build context) relative to the project; `None` outside it.
fn in_context(context: &str, rel: &str) -> Option<String> {
    match normalise(&crate::init::values::path_in(Some(context), rel)) {
        Dir::Below(p) => Some(p),
        Dir::Here => Some(String::new()),
        Dir::Outside => None,
    }
}

/// `path` made absolute against `wd`.
fn absolute(wd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", wd.trim_end_matches('/'))
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in joined.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = format!("/{}", parts.join("/"));
    if path.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

/// The words of an instruction in its exec (`["a", "b"]`) or shell form.
fn exec_words(rest: &str) -> Vec<String> {
    let t = rest.trim();
    if t.starts_with('[') {
        if let Ok(words) = serde_json::from_str::<Vec<String>>(t) {
            return words;
        }
    }
    t.split_whitespace().map(str::to_owned).collect()
}

/// The command a start script ends with (`exec python manage.py runserver 0.0.0.0:8000`):
/// its last line that runs something, without `exec`.
pub(in crate::init) fn script_command(text: &str) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        match t.strip_suffix('\\') {
            Some(part) => {
                cur.push_str(part.trim());
                cur.push(' ');
            }
            None => {
                cur.push_str(t);
                lines.push(std::mem::take(&mut cur));
            }
        }
    }
    lines
        .into_iter()
        .rev()
        .map(|l| l.trim().to_owned())
        .find(|l| {
            !l.is_empty()
                && !l.starts_with('#')
                && !["set ", "export ", "fi", "done", "esac", "}", "unset "]
                    .iter()
                    .any(|p| l.starts_with(p))
        })
        .map(|l| l.strip_prefix("exec ").unwrap_or(&l).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dockerfile_says_where_image_paths_come_from() {
        let df = Dockerfile::parse(
            "FROM node:20 AS build\nWORKDIR /app\nCOPY . .\nFROM python:3.12\nWORKDIR /srv/\nCOPY ./requirements.txt ./alembic.ini /srv/\nCOPY ./compose/start /start\nCOPY ./src /srv/code\nCMD [\"python\", \"-m\", \"app\"]\n",
            None,
        );
        assert_eq!(df.workdir.as_deref(), Some("/srv/"));
        assert_eq!(df.cmd.as_deref(), Some("python -m app"));
        assert_eq!(
            df.host_path("api", "/start").as_deref(),
            Some("api/compose/start")
        );
        assert_eq!(
            df.host_path("api", "/srv/code/x.py").as_deref(),
            Some("api/src/x.py")
        );
        assert_eq!(
            df.host_path("api", "/srv/alembic.ini").as_deref(),
            Some("api/alembic.ini")
        );
        // A file copied into /srv/ is not /srv itself.
        assert_eq!(df.host_path("api", "/srv"), None);
        // A monorepo's image: the API's directory is where its parts were copied from.
        let mono = Dockerfile::parse(
            "FROM node:22 AS frontend-build\nWORKDIR /app/frontend\nCOPY ./frontend /app/frontend\nFROM python:3.12\nWORKDIR /app/\nCOPY ./backend/alembic.ini /app/backend/\nCOPY ./backend/app /app/backend/app\nWORKDIR /app/backend/\nCMD [\"fastapi\", \"run\"]\n",
            None,
        );
        assert_eq!(mono.workdir.as_deref(), Some("/app/backend/"));
        assert_eq!(
            mono.host_path(".", "/app/backend/").as_deref(),
            Some("backend")
        );
        assert_eq!(mono.host_path(".", "/app"), None);
        // The frontend built only in the API's image: its stage's build arguments.
        let files: BTreeMap<String, String> = [(
            "backend/Dockerfile".to_owned(),
            "FROM node:22 AS frontend-build\nARG VITE_API_URL=\nARG NODE_ENV=production\nCOPY frontend/package.json /app/frontend/\nCOPY ./frontend /app/frontend\nRUN npm run build\nFROM python:3.12\nARG PIP_INDEX\nCOPY ./backend/app /app/backend/app\nCOPY --from=frontend-build /app/frontend/dist /app/static\n".to_owned(),
        )]
        .into();
        let build = Build {
            context: String::new(),
            dockerfile: "backend/Dockerfile".into(),
            target: None,
        };
        assert_eq!(
            build.args_of_stages_copying(&files, "frontend"),
            ["VITE_API_URL", "NODE_ENV"]
        );
        assert_eq!(
            build.args_of_stages_copying(&files, "backend"),
            ["PIP_INDEX"]
        );
        assert!(build.args_of_stages_copying(&files, "docs").is_empty());
        let first = Dockerfile::parse("FROM a AS build\nWORKDIR /app\nFROM b\n", Some("build"));
        assert_eq!(first.workdir.as_deref(), Some("/app"));
        assert_eq!(
            script_command("#!/bin/bash\nset -o errexit\npython manage.py migrate\nexec python manage.py runserver 0.0.0.0:8000\n"),
            Some("python manage.py runserver 0.0.0.0:8000".to_owned())
        );
    }

    #[test]
    fn a_build_names_its_dockerfile_in_the_project_and_nothing_outside_it() {
        let def = |yaml: &str| -> Mapping { serde_yaml_ng::from_str(yaml).unwrap() };
        let b = Build::of(&def(
            "build: { context: ./api, dockerfile: Dockerfile.dev, target: dev }",
        ))
        .unwrap();
        assert_eq!(
            (b.context.as_str(), b.target.as_deref()),
            ("api", Some("dev"))
        );
        assert_eq!(b.dockerfile_path().as_deref(), Some("api/Dockerfile.dev"));
        let here = Build::of(&def("build: .")).unwrap();
        assert_eq!(here.dockerfile_path().as_deref(), Some("Dockerfile"));
        for outside in [
            "build: ../shared",
            "build: https://github.com/x/y.git",
            "build: ${CTX}",
            "image: x",
        ] {
            assert_eq!(Build::of(&def(outside)), None, "{outside}");
        }
        let files: BTreeMap<String, String> = [(
            "api/Dockerfile.dev".to_owned(),
            "FROM a AS dev\nCMD npm run dev\nFROM b\nCMD serve\n".to_owned(),
        )]
        .into();
        assert_eq!(
            b.dockerfile(&files).and_then(|d| d.cmd).as_deref(),
            Some("npm run dev")
        );
        assert_eq!(here.dockerfile(&files), None, "no Dockerfile at the top");
    }

    #[test]
    fn a_dockerfile_that_is_not_one_says_nothing() {
        for text in ["", "just words\n", "CMD before any FROM\n", "FROM\n"] {
            let df = Dockerfile::parse(text, None);
            assert_eq!((df.workdir, df.cmd), (None, None), "{text:?}");
        }
        assert_eq!(script_command("#!/bin/sh\nset -e\n"), None);
    }
}
