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
    /// The environment variables the Python settings read by name (`os.environ["DB_HOST"]`,
    /// `os.environ.get(…)`, `os.getenv(…)`, django-environ's `env("…")`/`env.int("…")`,
    /// python-decouple's `config("…")`), each once, in the order met.
    pub(in crate::init) env_reads: Vec<String>,
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

    /// The settings of an address in parts that the settings read, for one of the
    /// `prefixes` (`DB`, `DATABASE`, `POSTGRES`, …; the first with a `*_HOST` read wins):
    /// `(variable, field)` with field one of `host`, `port`, `user`, `password`,
    /// `database`. Empty when none is read.
    pub(in crate::init) fn parts(&self, prefixes: &[&str]) -> Vec<(String, &'static str)> {
        const FIELDS: &[(&str, &str)] = &[
            ("HOST", "host"),
            ("PORT", "port"),
            ("USER", "user"),
            ("USERNAME", "user"),
            ("PASSWORD", "password"),
            ("PASS", "password"),
            ("NAME", "database"),
            ("DB", "database"),
            ("DATABASE", "database"),
        ];
        let Some(prefix) = prefixes
            .iter()
            .find(|p| self.env_reads.contains(&format!("{p}_HOST")))
        else {
            return Vec::new();
        };
        FIELDS
            .iter()
            .map(|(suffix, field)| (format!("{prefix}_{suffix}"), *field))
            .filter(|(var, _)| self.env_reads.contains(var))
            .collect()
    }
}

/// The variable names `text` (Python) reads from the environment by name.
fn env_reads(text: &str, out: &mut Vec<String>) {
    const CALLS: &[&str] = &[
        "environ[",
        "environ.get(",
        "getenv(",
        "env(",
        "env.str(",
        "env.int(",
        "env.bool(",
        "config(",
    ];
    for call in CALLS {
        for (at, _) in text.match_indices(call) {
            let rest = text[at + call.len()..].trim_start();
            let Some(quote) = rest.chars().next().filter(|c| matches!(c, '"' | '\'')) else {
                continue;
            };
            let name: String = rest[1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let closed = rest[1 + name.len()..].starts_with(quote);
            if closed && !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
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
        env_reads: {
            let mut out = Vec::new();
            for (_, t) in files.iter().filter(|(p, _)| p.ends_with(".py")) {
                env_reads(t, &mut out);
            }
            out
        },
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

    #[test]
    fn the_settings_of_an_address_in_parts_are_the_names_the_settings_read() {
        let d = read(&files(&[(
            "app/configuration.py",
            "DATABASE = {\n    'HOST': os.environ.get('DB_HOST', 'localhost'),\n    'PORT': os.environ.get(\"DB_PORT\", ''),\n    'USER': os.getenv('DB_USER'),\n    'PASSWORD': env.str('DB_PASSWORD'),\n    'NAME': environ['DB_NAME'],\n}\nREDIS = {'HOST': config('REDIS_HOST'), 'PORT': env.int('REDIS_PORT')}\nX = os.environ.get(name)\n",
        )]));
        assert_eq!(
            d.parts(&["DATABASE", "DB"]),
            [
                ("DB_HOST".to_owned(), "host"),
                ("DB_PORT".to_owned(), "port"),
                ("DB_USER".to_owned(), "user"),
                ("DB_PASSWORD".to_owned(), "password"),
                ("DB_NAME".to_owned(), "database"),
            ]
        );
        assert_eq!(
            d.parts(&["REDIS"]),
            [
                ("REDIS_HOST".to_owned(), "host"),
                ("REDIS_PORT".to_owned(), "port")
            ]
        );
        assert!(d.parts(&["POSTGRES"]).is_empty());
    }
}
