//! The reading steps: each reads some of the project's files and says what it found, as a
//! typed value, with no other state. [`Findings::of`] runs them all; what is made of the
//! findings is decided in one place, [`crate::init::plan::Plan::merge`].

use std::collections::{BTreeMap, BTreeSet};

use crate::init::repo::Repo;
use crate::init::InitError;

pub(in crate::init) mod alembic;
pub(in crate::init) mod compose;
pub(in crate::init) mod django;
pub(in crate::init) mod dockerfile;
pub(in crate::init) mod hosts;
pub(in crate::init) mod package_json;
pub(in crate::init) mod procfile;
pub(in crate::init) mod python;

/// Everything the reading steps found in a project.
#[derive(Clone, Debug)]
pub(in crate::init) struct Findings {
    /// The directory's name (for the error that nothing was found).
    pub(in crate::init) dir_name: String,
    /// The compose file, when the project has one.
    pub(in crate::init) compose: Option<compose::ComposeFile>,
    /// `.env`'s variables, in the file's order.
    pub(in crate::init) dotenv: Vec<(String, String)>,
    /// Git tracks `.env` (see [`Repo::dotenv_tracked`]).
    pub(in crate::init) dotenv_tracked: bool,
    /// The git-ignored virtualenvs and their programs (see [`Repo::venvs`]).
    pub(in crate::init) venvs: BTreeMap<String, BTreeSet<String>>,
    /// The variables of each `env_file` compose services name (path as written).
    pub(in crate::init) env_files: BTreeMap<String, Vec<(String, String)>>,
    /// The project's files init read (Dockerfiles and the scripts they copy are read
    /// through [`dockerfile`] once compose says which service builds which).
    pub(in crate::init) files: BTreeMap<String, String>,
    /// The programs of [`crate::init::TOOLS`] found on `PATH`.
    pub(in crate::init) installed: BTreeSet<String>,
    /// The Procfile, when there is one with a process type.
    pub(in crate::init) procfile: Option<procfile::Procfile>,
    /// Every `package.json`.
    pub(in crate::init) packages: package_json::Packages,
    /// Django's `manage.py` files and the settings that read `DATABASE_URL`.
    pub(in crate::init) django: django::Django,
    /// Alembic's `alembic.ini` files.
    pub(in crate::init) alembic: alembic::Alembic,
    /// Python's dependencies and ASGI app.
    pub(in crate::init) python: python::Python,
    /// Frameworks that check the `Host` header.
    pub(in crate::init) host_checks: Vec<hosts::HostCheck>,
}

impl Findings {
    /// Run every reading step over `repo`. A compose file that cannot be read is the one
    /// error: nothing is written from a compose file binky misread.
    pub(in crate::init) fn of(repo: &Repo) -> Result<Findings, InitError> {
        let parse = binky_controllers::env::parse_dotenv;
        Ok(Findings {
            dir_name: repo.dir_name.clone(),
            compose: repo.compose.as_ref().map(compose::read).transpose()?,
            dotenv: repo.dotenv.as_deref().map(parse).unwrap_or_default(),
            dotenv_tracked: repo.dotenv_tracked && repo.dotenv.is_some(),
            venvs: repo.venvs.clone(),
            env_files: repo
                .env_files
                .iter()
                .map(|(path, text)| (path.clone(), parse(text)))
                .collect(),
            files: repo.files.clone(),
            installed: repo.installed.clone(),
            procfile: procfile::read(&repo.files),
            packages: package_json::read(&repo.files),
            django: django::read(&repo.files),
            alembic: alembic::read(&repo.files),
            python: python::read(&repo.files),
            host_checks: hosts::read(&repo.files),
        })
    }
}

/// A project's files as the reading steps get them, from `(path, text)` pairs: for their tests.
#[cfg(test)]
pub(in crate::init) fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}
