//! The repository facts [`super::generate`] works from ([`Repo`]), which files the CLI reads
//! to fill it ([`wanted_file`], [`referenced_files`]), and what they say: Dockerfiles
//! (`WORKDIR`, `COPY`, `CMD`), `package.json` scripts, a `Procfile`, Python requirements.

use super::*;

/// A compose text, and the name of the file (or files, `a.yml + b.yml`) it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComposeSource {
    /// The file's name as people see it (`docker-compose.yml`, `compose.yaml + compose.override.yaml`).
    pub name: String,
    /// The text (several files already merged with [`merge_compose`]).
    pub text: String,
}

/// What `binky init` knows of a project's directory. The CLI fills it from the filesystem;
/// [`super::generate`] reads nothing else, so it is pure and testable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repo {
    /// The directory's name: `[project] name` comes from it.
    pub dir_name: String,
    /// The project's compose file(s), if it has any.
    pub compose: Option<ComposeSource>,
    /// The text of `.env`.
    pub dotenv: Option<String>,
    /// The `env_file`s compose services name, other than `.env` (path as written → text).
    pub env_files: BTreeMap<String, String>,
    /// Files that say what runs and how, by path relative to the directory (`/`-separated,
    /// no `./`) → text: those [`wanted_file`] accepts and those [`referenced_files`] names.
    pub files: BTreeMap<String, String>,
    /// The programs of [`TOOLS`] found on `PATH`.
    pub installed: BTreeSet<String>,
}

impl Repo {
    /// The text of the file at `path` (relative, normalised).
    pub(super) fn file(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    /// `dir/name`, or `name` at the top (`dir` `None`).
    pub(super) fn path_in(dir: Option<&str>, name: &str) -> String {
        match dir {
            Some(d) if !d.is_empty() && d != "." => format!("{d}/{name}"),
            _ => name.to_owned(),
        }
    }

    /// The text of `name` in directory `dir` (`None`: the top).
    pub(super) fn file_in(&self, dir: Option<&str>, name: &str) -> Option<&str> {
        self.file(&Self::path_in(dir, name))
    }

    /// Any `vite.config.*` / `next.config.*` in `dir`: its path.
    pub(super) fn config_in(&self, dir: Option<&str>, stem: &str) -> Option<String> {
        CONFIG_EXTS
            .iter()
            .map(|ext| Self::path_in(dir, &format!("{stem}.{ext}")))
            .find(|p| self.files.contains_key(p))
    }
}

const CONFIG_EXTS: &[&str] = &["js", "ts", "mjs", "mts", "cjs", "cts"];

/// Directories the CLI does not look into.
pub const SKIP_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "vendor",
    "target",
    "__pycache__",
    "dist",
    "build",
    ".next",
    ".cache",
    ".tox",
];

/// How many directories deep the CLI looks (`apps/web/vite.config.ts` is 2).
pub const MAX_DEPTH: usize = 4;

/// The programs init may write a command for that a project does not install itself (mail
/// catchers): the CLI looks each up on `PATH`, and one that is missing is written commented
/// out, with how to install it.
pub const TOOLS: &[&str] = &["mailpit", "MailHog", "maildev", "mailcatcher"];

/// Should the CLI read the file at `rel` (relative to the project, `/`-separated) into
/// [`Repo::files`]?
pub fn wanted_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let parent = rel.rsplit('/').nth(1).unwrap_or("");
    // pnpm's lock file says how to run scripts.
    name == "Dockerfile"
        || name == "pnpm-lock.yaml"
        || name.starts_with("Dockerfile.")
        || name.ends_with(".Dockerfile")
        || matches!(
            name,
            "package.json"
                | "Procfile"
                | "Procfile.dev"
                | "manage.py"
                | "alembic.ini"
                | "pyproject.toml"
                | "Pipfile"
        )
        || (name.starts_with("requirements") && name.ends_with(".txt"))
        || (parent == "requirements" && name.ends_with(".txt"))
        || ["vite.config.", "next.config."]
            .iter()
            .any(|s| name.starts_with(s) && CONFIG_EXTS.iter().any(|e| name.ends_with(e)))
        || rel == "config/application.rb"
        || rel.ends_with("/config/application.rb")
        // An ASGI app's module (`main.py` with `app = FastAPI()`), at the top or two
        // directories down: what runs when nothing else says.
        || (matches!(name, "main.py" | "app.py" | "asgi.py") && rel.matches('/').count() <= 2)
        // Python settings: do they read DATABASE_URL (what `migrate` gets)?
        || (name.ends_with(".py")
            && (matches!(name, "settings.py" | "config.py" | "env.py" | "database.py" | "db.py")
                || parent == "settings"))
}

/// Files of the project that compose services name: their Dockerfiles, and the scripts
/// they run through their image (`command: /start` with `COPY ./compose/local/django/start
/// /start` in the Dockerfile). The CLI reads them into [`Repo::files`] too (once more after
/// that, for the scripts of Dockerfiles it has just read). Paths relative to the project.
pub fn referenced_files(repo: &Repo) -> Vec<String> {
    let Some(compose) = &repo.compose else {
        return Vec::new();
    };
    let Ok(mut doc) = serde_yaml_ng::from_str::<Value>(&compose.text) else {
        return Vec::new();
    };
    if doc.apply_merge().is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(Value::Mapping(services)) = doc.get("services") {
        for def in services.values().filter_map(Value::as_mapping) {
            let Some(build) = Build::of(def) else {
                continue;
            };
            let dockerfile = build.dockerfile_path();
            if let Some(path) = dockerfile.filter(|p| !out.contains(p)) {
                out.push(path);
            }
            let Some(df) = build.dockerfile(repo) else {
                continue;
            };
            let mut paths = Vec::new();
            paths.extend(match command_of(def) {
                Some(Command::Words(ws)) => ws.first().cloned(),
                Some(Command::Shell(s)) => s.split_whitespace().next().map(str::to_owned),
                None => None,
            });
            paths.extend(df.cmd_first_word());
            for p in paths.into_iter().filter(|p| p.starts_with('/')) {
                if let Some(host) = df.host_path(&build.context, &p) {
                    if !out.contains(&host) {
                        out.push(host);
                    }
                }
            }
        }
    }
    out
}

// --- compose `build:` and Dockerfiles ---------------------------------------------------

/// A compose service's `build:`, as far as the host is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Build {
    /// The context, relative to the project and normalised (`""` for the project itself).
    pub(super) context: String,
    /// The Dockerfile, relative to the context as compose reads it.
    pub(super) dockerfile: String,
    /// `build.target`: the stage built.
    pub(super) target: Option<String>,
}

impl Build {
    /// `build:` of a service whose context is in the project; `None` otherwise.
    pub(super) fn of(def: &Mapping) -> Option<Build> {
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
    pub(super) fn dockerfile_path(&self) -> Option<String> {
        match normalise(&Repo::path_in(Some(&self.context), &self.dockerfile)) {
            Dir::Below(p) => Some(p),
            _ => None,
        }
    }

    /// The Dockerfile, read, for its build target.
    pub(super) fn dockerfile(&self, repo: &Repo) -> Option<Dockerfile> {
        let text = repo.file(&self.dockerfile_path()?)?;
        Some(Dockerfile::parse(text, self.target.as_deref()))
    }
}

/// What a Dockerfile's stage says about where the code is and what runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Dockerfile {
    /// The last `WORKDIR` (absolute).
    pub(super) workdir: Option<String>,
    /// `COPY`/`ADD` from the build context: `(source, absolute destination)`.
    pub(super) copies: Vec<(String, String)>,
    /// `CMD`, as one shell text.
    pub(super) cmd: Option<String>,
    /// `ENTRYPOINT`, as one shell text.
    pub(super) entrypoint: Option<String>,
}

impl Dockerfile {
    /// The stage named `target`, else the last one.
    pub(super) fn parse(text: &str, target: Option<&str>) -> Dockerfile {
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

    fn cmd_first_word(&self) -> Option<String> {
        self.cmd
            .as_deref()
            .and_then(|c| c.split_whitespace().next())
            .map(str::to_owned)
    }

    /// Where a path inside the image came from in the project, through the `COPY`s (the
    /// last one that covers it wins), relative to the project.
    pub(super) fn host_path(&self, context: &str, path: &str) -> Option<String> {
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
                return match normalise(&Repo::path_in(Some(context), &rel)) {
                    Dir::Below(p) => Some(p),
                    Dir::Here => Some(String::new()),
                    Dir::Outside => None,
                };
            }
        }
        None
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
pub(super) fn script_command(text: &str) -> Option<String> {
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

// --- package.json, Procfile, Python requirements ----------------------------------------

/// A JavaScript dev server a `package.json` runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DevServer {
    /// `vite`, `next`, or another script's first word.
    pub(super) framework: &'static str,
    /// The package's directory (`None`: the top).
    pub(super) dir: Option<String>,
    /// The host command, listening on `${self.port}`.
    pub(super) cmd: String,
    /// What a person should know (Vite's host check).
    pub(super) note: Option<String>,
    /// The package manager the lock file says (`npm`, `pnpm`, `yarn`, `bun`).
    pub(super) manager: &'static str,
}

/// The dev server of the `package.json` in `dir`, if its `dev` script (or `start`, for
/// Next.js) runs Vite or Next.js.
pub(super) fn dev_server(repo: &Repo, dir: Option<&str>) -> Option<DevServer> {
    let text = repo.file_in(dir, "package.json")?;
    let json: serde_json::Value = serde_json::from_str(text).ok()?;
    let scripts = json.get("scripts")?.as_object()?;
    let dev = scripts.get("dev").and_then(|s| s.as_str()).unwrap_or("");
    let has_vite = repo.config_in(dir, "vite.config").is_some() || dev.contains("vite");
    let has_next = repo.config_in(dir, "next.config").is_some() || dev.contains("next ");
    let manager = if repo.file_in(dir, "pnpm-lock.yaml").is_some() {
        "pnpm"
    } else {
        "npm"
    };
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
        let config = repo
            .config_in(dir, "vite.config")
            .unwrap_or_else(|| Repo::path_in(dir, "vite.config.ts"));
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

/// `Procfile` lines: `(process type, command)`.
pub(super) fn procfile(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.starts_with('#') {
                return None;
            }
            let (name, cmd) = l.split_once(':')?;
            let name = name.trim();
            (!name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !cmd.trim().is_empty())
            .then(|| (name.to_owned(), cmd.trim().to_owned()))
        })
        .collect()
}

/// What the Python dependencies (requirements files, `pyproject.toml`, `Pipfile`) name,
/// lower-case, each once.
pub(super) fn python_deps(repo: &Repo) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, text) in &repo.files {
        let name = path.rsplit('/').next().unwrap_or(path);
        let python = name.ends_with(".txt") || matches!(name, "pyproject.toml" | "Pipfile");
        if !python {
            continue;
        }
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')) {
            let w = word.to_ascii_lowercase();
            if !w.is_empty() {
                out.insert(w);
            }
        }
    }
    out
}
