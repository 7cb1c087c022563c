//! Reading step: where the project's `alembic.ini` files are (Alembic migrates the
//! database of the code beside it).

use std::collections::BTreeMap;

use crate::init::values::path_in;

/// The project's Alembic configurations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::init) struct Alembic {
    /// The paths of `alembic.ini`, in path order.
    pub(in crate::init) inis: Vec<String>,
}

impl Alembic {
    /// The first `alembic.ini` (in path order), if any.
    pub(in crate::init) fn first(&self) -> Option<&str> {
        self.inis.first().map(String::as_str)
    }

    /// Is there an `alembic.ini` in `dir` (`None`: the top)?
    pub(in crate::init) fn in_dir(&self, dir: Option<&str>) -> bool {
        let path = crate::init::values::path_in(dir, "alembic.ini");
        self.inis.contains(&path)
    }

    /// The command that migrates with it.
    pub(in crate::init) const MIGRATE: &'static str = "alembic upgrade head";

    /// The seed of the code in `dir` (`None`: the top), run after `alembic upgrade head`:
    /// the Python commands its prestart script runs after the migration (`scripts/prestart.sh`
    /// or `prestart.sh`: `alembic upgrade head` then `python app/initial_data.py`), else
    /// `python -m app.initial_data` when `app/initial_data.py` is there. `(command, where
    /// it came from)`.
    pub(in crate::init) fn seed(
        files: &BTreeMap<String, String>,
        dir: Option<&str>,
    ) -> Option<(String, String)> {
        for script in ["scripts/prestart.sh", "prestart.sh"] {
            let path = path_in(dir, script);
            let Some(text) = files.get(&path) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            let Some(at) = lines.iter().position(|l| l.contains("alembic upgrade")) else {
                continue;
            };
            let seeds: Vec<&str> = lines[at + 1..]
                .iter()
                .copied()
                .filter(|l| l.starts_with("python ") || l.starts_with("python3 "))
                .collect();
            if !seeds.is_empty() {
                return Some((seeds.join(" && "), path));
            }
        }
        let data = path_in(dir, "app/initial_data.py");
        files
            .contains_key(&data)
            .then(|| ("python -m app.initial_data".to_owned(), data))
    }
}

/// The `alembic.ini` files of `files` (paths relative to the project → text).
pub(in crate::init) fn read(files: &BTreeMap<String, String>) -> Alembic {
    Alembic {
        inis: files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some("alembic.ini"))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alembic_ini_is_found_by_directory() {
        let files: BTreeMap<String, String> = [
            ("backend/alembic.ini", "[alembic]\n"),
            ("backend/app/main.py", ""),
            ("alembic.ini.bak", ""),
        ]
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        let a = read(&files);
        assert_eq!(a.first(), Some("backend/alembic.ini"));
        assert!(a.in_dir(Some("backend")));
        assert!(!a.in_dir(None));
        assert_eq!(read(&BTreeMap::new()).first(), None);
    }

    #[test]
    fn the_seed_is_what_the_prestart_script_runs_after_the_migration_else_initial_data() {
        let files = crate::init::read::files(&[
            (
                "backend/scripts/prestart.sh",
                "#! /usr/bin/env bash\nset -e\npython app/backend_pre_start.py\nalembic upgrade head\n# data\npython app/initial_data.py\n",
            ),
            ("backend/app/initial_data.py", ""),
            ("api/app/initial_data.py", ""),
            ("other/prestart.sh", "alembic upgrade head\n"),
        ]);
        assert_eq!(
            Alembic::seed(&files, Some("backend")),
            Some((
                "python app/initial_data.py".to_owned(),
                "backend/scripts/prestart.sh".to_owned()
            ))
        );
        assert_eq!(
            Alembic::seed(&files, Some("api")).map(|s| s.0).as_deref(),
            Some("python -m app.initial_data")
        );
        // A prestart script that only migrates, and no initial data: no seed.
        assert_eq!(Alembic::seed(&files, Some("other")), None);
        assert_eq!(Alembic::seed(&files, None), None);
    }
}
