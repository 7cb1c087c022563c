//! Reading step: what the Python dependencies name (requirements files, `pyproject.toml`,
//! `Pipfile`), and the ASGI app a `main.py`/`app.py`/`asgi.py` makes.

use std::collections::{BTreeMap, BTreeSet};

/// What the project's Python files say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::init) struct Python {
    /// The words of its dependency files, lower-case, each once.
    pub(in crate::init) deps: BTreeSet<String>,
    /// An ASGI app: its file and the variable that holds it.
    pub(in crate::init) asgi: Option<(String, String)>,
}

/// What `files` (paths relative to the project → text) say of Python.
pub(in crate::init) fn read(files: &BTreeMap<String, String>) -> Python {
    let deps = deps(files);
    let asgi = asgi_app(files, &deps);
    Python { deps, asgi }
}

/// What the Python dependencies name, lower-case, each once.
fn deps(files: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, text) in files {
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

/// An ASGI app in the project's Python dependencies' reach: the first of `main.py`,
/// `app.py`, `asgi.py` (at the top, then one directory down) that makes one
/// (`app = FastAPI(…)`, `Starlette(…)`, `Quart(…)`, `Litestar(…)`), when the dependencies
/// name uvicorn or the framework. Its path and the app's variable.
fn asgi_app(files: &BTreeMap<String, String>, deps: &BTreeSet<String>) -> Option<(String, String)> {
    if !["uvicorn", "fastapi", "starlette", "litestar"]
        .iter()
        .any(|d| deps.contains(*d))
    {
        return None;
    }
    let mut paths: Vec<&String> = files
        .keys()
        .filter(|p| matches!(p.rsplit('/').next(), Some("main.py" | "app.py" | "asgi.py")))
        .collect();
    paths.sort_by_key(|p| (p.matches('/').count(), !p.ends_with("main.py")));
    for path in paths {
        let text = &files[path];
        for line in text.lines() {
            let Some((var, rest)) = line.split_once('=') else {
                continue;
            };
            let var = var.trim();
            let rest = rest.trim_start();
            let is_app = ["FastAPI(", "Starlette(", "Quart(", "Litestar("]
                .iter()
                .any(|f| rest.starts_with(f));
            if is_app
                && !var.is_empty()
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !line.starts_with(char::is_whitespace)
            {
                return Some((path.clone(), var.to_owned()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::init::read::files;

    #[test]
    fn dependency_files_name_their_packages_lower_case() {
        let p = read(&files(&[
            ("requirements/base.txt", "Django==5.0\npsycopg[binary]>=3\n"),
            (
                "pyproject.toml",
                "[project]\ndependencies = [\"Celery>=5\"]\n",
            ),
            ("app/models.py", "import redis"),
        ]));
        for d in ["django", "psycopg", "celery"] {
            assert!(p.deps.contains(d), "{d}: {:?}", p.deps);
        }
        assert!(
            !p.deps.contains("redis"),
            "a .py file is no dependency file"
        );
    }

    #[test]
    fn the_asgi_app_is_the_shallowest_main_py_that_makes_one() {
        let p = read(&files(&[
            ("requirements.txt", "fastapi\nuvicorn\n"),
            (
                "app/main.py",
                "from fastapi import FastAPI\napi = FastAPI(title='x')\n",
            ),
            ("app/app.py", "app = FastAPI()\n"),
            ("tools/x/main.py", "app = FastAPI()\n"),
        ]));
        assert_eq!(p.asgi, Some(("app/main.py".to_owned(), "api".to_owned())));
    }

    #[test]
    fn no_asgi_app_without_its_dependencies_or_at_an_indented_line() {
        let no_deps = read(&files(&[("main.py", "app = FastAPI()\n")]));
        assert_eq!(no_deps.asgi, None);
        let indented = read(&files(&[
            ("requirements.txt", "uvicorn\n"),
            ("main.py", "def make():\n    app = FastAPI()\n"),
        ]));
        assert_eq!(indented.asgi, None);
    }
}
