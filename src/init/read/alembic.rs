//! Reading step: where the project's `alembic.ini` files are (Alembic migrates the
//! database of the code beside it).

use std::collections::BTreeMap;

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
}
