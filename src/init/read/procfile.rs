//! Reading step: the project's `Procfile.dev` (else `Procfile`) to its process types and
//! its release phase.

use std::collections::BTreeMap;

/// What a Procfile says runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::init) struct Procfile {
    /// The file read (`Procfile.dev` or `Procfile`).
    pub(in crate::init) file: &'static str,
    /// `(process type, command)`, in the file's order, without `release`.
    pub(in crate::init) processes: Vec<(String, String)>,
    /// The `release` phase's command (the last one written), if any.
    pub(in crate::init) release: Option<String>,
}

/// The first of `Procfile.dev` and `Procfile` in `files` (`Procfile.dev` is the one for
/// development when both are there), when it has at least one process type.
pub(in crate::init) fn read(files: &BTreeMap<String, String>) -> Option<Procfile> {
    let (file, lines) = ["Procfile.dev", "Procfile"]
        .iter()
        .find_map(|f| files.get(*f).map(|t| (*f, lines(t))))
        .filter(|(_, p)| !p.is_empty())?;
    let mut processes = Vec::new();
    let mut release = None;
    for (kind, cmd) in lines {
        if kind == "release" {
            release = Some(cmd);
        } else {
            processes.push((kind, cmd));
        }
    }
    Some(Procfile {
        file,
        processes,
        release,
    })
}

/// `Procfile` lines: `(process type, command)`.
fn lines(text: &str) -> Vec<(String, String)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::init::read::files;

    #[test]
    fn process_types_come_in_order_and_release_apart() {
        let p = read(&files(&[(
            "Procfile",
            "# comment\nweb: gunicorn app:app\nrelease: python manage.py migrate\nworker: celery -A app worker\n",
        )]))
        .unwrap();
        assert_eq!(p.file, "Procfile");
        assert_eq!(
            p.processes,
            [
                ("web".to_owned(), "gunicorn app:app".to_owned()),
                ("worker".to_owned(), "celery -A app worker".to_owned())
            ]
        );
        assert_eq!(p.release.as_deref(), Some("python manage.py migrate"));
    }

    #[test]
    fn procfile_dev_wins_and_lines_that_are_no_process_are_skipped() {
        let p = read(&files(&[
            ("Procfile", "web: gunicorn app\n"),
            (
                "Procfile.dev",
                "web: flask run\nnot a line\nbad name!: x\nempty:\n",
            ),
        ]))
        .unwrap();
        assert_eq!(p.file, "Procfile.dev");
        assert_eq!(p.processes, [("web".to_owned(), "flask run".to_owned())]);
    }

    #[test]
    fn a_procfile_with_no_process_type_is_none() {
        assert_eq!(read(&files(&[("Procfile", "# nothing\n\n")])), None);
        // Procfile.dev is the one read: an empty one is not passed over for Procfile.
        assert_eq!(
            read(&files(&[("Procfile.dev", "\n"), ("Procfile", "web: x\n")])),
            None
        );
        assert_eq!(read(&files(&[])), None);
    }
}
