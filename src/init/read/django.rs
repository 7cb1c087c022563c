//! Reading step: a Django project's `manage.py` files (what runs its development server
//! and its migrations) and the Python settings that read `DATABASE_URL`.

use std::collections::BTreeMap;

/// What the project's files say of Django.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::init) struct Django {
    /// The paths of `manage.py`, in path order.
    pub(in crate::init) manage: Vec<String>,
    /// The Python files that read `DATABASE_URL` (settings, `env.py`, …), in path order.
    pub(in crate::init) reads_database_url: Vec<String>,
}

impl Django {
    /// The directory of the project's main `manage.py` (`None` inside: the top): the
    /// shallowest one at the top or one or two directories down (`backend/manage.py`).
    pub(in crate::init) fn main_dir(&self) -> Option<Option<String>> {
        self.manage
            .iter()
            .filter(|p| p.matches('/').count() <= 2)
            .min_by_key(|p| p.matches('/').count())
            .map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()))
    }

    /// Is there a `manage.py` in `dir` (`None`: the top)?
    pub(in crate::init) fn in_dir(&self, dir: Option<&str>) -> bool {
        self.manage
            .contains(&crate::init::values::path_in(dir, "manage.py"))
    }

    /// The first Python file under `workdir` (`None`: anywhere) that reads `DATABASE_URL`.
    pub(in crate::init) fn database_url_reader(&self, workdir: Option<&str>) -> Option<&str> {
        let prefix = workdir.map(|w| format!("{w}/")).unwrap_or_default();
        self.reads_database_url
            .iter()
            .find(|p| p.starts_with(&prefix))
            .map(String::as_str)
    }

    /// The command that migrates with it.
    pub(in crate::init) const MIGRATE: &'static str = "python manage.py migrate --noinput";
}

/// What `files` (paths relative to the project → text) say of Django.
pub(in crate::init) fn read(files: &BTreeMap<String, String>) -> Django {
    Django {
        manage: files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some("manage.py"))
            .cloned()
            .collect(),
        reads_database_url: files
            .iter()
            .filter(|(p, t)| p.ends_with(".py") && t.contains("DATABASE_URL"))
            .map(|(p, _)| p.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::init::read::files;

    #[test]
    fn the_shallowest_manage_py_is_the_main_one() {
        let d = read(&files(&[
            ("a/b/c/manage.py", ""),
            ("backend/manage.py", ""),
            ("tools/manage.py", ""),
        ]));
        assert_eq!(d.main_dir(), Some(Some("backend".to_owned())));
        assert!(d.in_dir(Some("a/b/c")));
        assert!(!d.in_dir(None));
        let top = read(&files(&[("manage.py", ""), ("x/manage.py", "")]));
        assert_eq!(top.main_dir(), Some(None));
        assert_eq!(
            read(&files(&[("a/b/c/manage.py", "")])).main_dir(),
            None,
            "too deep"
        );
    }

    #[test]
    fn settings_that_read_database_url_are_found_under_a_workdir() {
        let d = read(&files(&[
            (
                "api/settings.py",
                "DATABASES = {'default': env.db('DATABASE_URL')}",
            ),
            ("web/settings.py", "DB_HOST = os.environ['DB_HOST']"),
            ("web/README.txt", "DATABASE_URL"),
        ]));
        assert_eq!(d.database_url_reader(Some("api")), Some("api/settings.py"));
        assert_eq!(d.database_url_reader(Some("web")), None);
        assert_eq!(d.database_url_reader(None), Some("api/settings.py"));
    }
}
