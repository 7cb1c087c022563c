//! Where the managed servers' programs are installed on each system, and how a person
//! installs them: binky runs PostgreSQL, MariaDB and a Redis-compatible server from the
//! machine's own installation.
//!
//! - Debian and Ubuntu: PostgreSQL in `/usr/lib/postgresql/<major>/bin` (one folder per
//!   installed major), MariaDB's server in `/usr/sbin` and its tools in `/usr/bin`, Redis (or
//!   Valkey) on `PATH`.
//! - Windows: the installers' folders under Program Files: PostgreSQL's (EDB's) installer
//!   `PostgreSQL\<major>\bin`, MariaDB's MSI `MariaDB <version>\bin`, and for Redis, Memurai
//!   (`Memurai\`) or the Redis port for Windows (`Redis\`).
//!
//! Everywhere, `PATH` is looked at after these folders (by the caller).

use std::path::{Path, PathBuf};

/// A server binky runs itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// PostgreSQL.
    Postgres,
    /// MariaDB (for the `mysql` kind).
    MariaDb,
    /// Redis, or a server that speaks its protocol (Valkey, Memurai).
    Redis,
}

/// Whose layout: the systems binky knows the installers of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// Debian's packages (and any Unix laid out like it).
    Debian,
    /// Windows' installers.
    Windows,
}

impl System {
    /// The system binky runs on.
    pub fn current() -> System {
        if cfg!(windows) {
            System::Windows
        } else {
            System::Debian
        }
    }
}

/// The program `program` in the folder `dir`, as it is to be run: `dir/program` with an
/// execute bit on Unix; on Windows `dir\program` with `.exe` (or `.cmd`, `.bat`, `.com`).
pub fn program_in(dir: &Path, program: &str) -> Option<PathBuf> {
    let names: &[&str] = if cfg!(windows) {
        &["exe", "cmd", "bat", "com"]
    } else {
        &[""]
    };
    names
        .iter()
        .map(|ext| {
            if ext.is_empty() {
                dir.join(program)
            } else {
                dir.join(format!("{program}.{ext}"))
            }
        })
        .find(|p| crate::fs::is_executable(p))
}

/// The folders where `server`'s programs are on this machine's system, most preferred
/// first: those of [`server_dirs_of`], listed from the disk (Windows' Program Files folders
/// from `%ProgramW6432%`, `%ProgramFiles%`, `%ProgramFiles(x86)%`).
pub fn server_dirs(server: Server, want: Option<&str>) -> Vec<PathBuf> {
    let mut program_files: Vec<PathBuf> = Vec::new();
    if System::current() == System::Windows {
        for var in ["ProgramW6432", "ProgramFiles", "ProgramFiles(x86)"] {
            if let Some(dir) = std::env::var_os(var).map(PathBuf::from) {
                if !program_files.contains(&dir) {
                    program_files.push(dir);
                }
            }
        }
    }
    let list = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    server_dirs_of(System::current(), server, want, &program_files, &list)
}

/// The folders where `system`'s installers put `server`'s programs, most preferred first,
/// given `list` (the names in a folder) and, for Windows, its Program Files folders. For
/// PostgreSQL and MariaDB, one folder per installed version: `want` first when it is
/// installed, then the newest to the oldest.
pub fn server_dirs_of(
    system: System,
    server: Server,
    want: Option<&str>,
    program_files: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<String>,
) -> Vec<PathBuf> {
    match (system, server) {
        (System::Debian, Server::Postgres) => {
            let root = Path::new("/usr/lib/postgresql");
            by_version(list(root), "", want)
                .into_iter()
                .map(|name| root.join(name).join("bin"))
                .collect()
        }
        (System::Debian, Server::MariaDb) => vec!["/usr/sbin".into(), "/usr/bin".into()],
        (System::Debian, Server::Redis) => Vec::new(),
        (System::Windows, Server::Postgres) => program_files
            .iter()
            .flat_map(|pf| {
                let root = pf.join("PostgreSQL");
                by_version(list(&root), "", want)
                    .into_iter()
                    .map(move |name| root.join(name).join("bin"))
            })
            .collect(),
        (System::Windows, Server::MariaDb) => program_files
            .iter()
            .flat_map(|pf| {
                by_version(list(pf), "MariaDB ", want)
                    .into_iter()
                    .map(move |name| pf.join(name).join("bin"))
            })
            .collect(),
        (System::Windows, Server::Redis) => program_files
            .iter()
            .flat_map(|pf| [pf.join("Memurai"), pf.join("Redis")])
            .collect(),
    }
}

/// The names of `names` that are `prefix` and a version (`16`, `11.4`), `want`'s first
/// (the version alone, or the whole name), then the highest version to the lowest.
fn by_version(names: Vec<String>, prefix: &str, want: Option<&str>) -> Vec<String> {
    let mut versions: Vec<(Vec<u32>, String)> = names
        .into_iter()
        .filter_map(|name| {
            let key = name
                .strip_prefix(prefix)?
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((key, name))
        })
        .collect();
    versions.sort();
    versions.reverse();
    if let Some(want) = want {
        if let Some(i) = versions
            .iter()
            .position(|(_, n)| n == want || n.strip_prefix(prefix) == Some(want))
        {
            let wanted = versions.remove(i);
            versions.insert(0, wanted);
        }
    }
    versions.into_iter().map(|(_, name)| name).collect()
}

/// How a person installs the Debian package `package` (`postgresql`, `mariadb-server`,
/// `redis-server`) on this system, for an error that says something is missing.
pub fn how_to_install(package: &str) -> String {
    how_to_install_on(System::current(), package)
}

/// [`how_to_install`] on `system`.
pub fn how_to_install_on(system: System, package: &str) -> String {
    match system {
        System::Debian => format!("install {package} (e.g. `sudo apt-get install {package}`)"),
        System::Windows => match package {
            "postgresql" => "on Windows, install PostgreSQL with its Windows installer \
                 (https://www.postgresql.org/download/windows/), which puts it in \
                 C:\\Program Files\\PostgreSQL\\<version>"
                .to_owned(),
            "mariadb-server" => "on Windows, install MariaDB with its MSI package \
                 (https://mariadb.org/download/), which puts it in \
                 C:\\Program Files\\MariaDB <version>"
                .to_owned(),
            "redis-server" => "on Windows, install Memurai (https://www.memurai.com/), the \
                 Redis-compatible server for Windows, which puts it in C:\\Program Files\\Memurai"
                .to_owned(),
            other => format!("on Windows, install {other} and put its folder on PATH"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing of made-up folders.
    fn listing<'a>(folders: &'a [(&'a str, &'a [&'a str])]) -> impl Fn(&Path) -> Vec<String> + 'a {
        move |dir: &Path| {
            folders
                .iter()
                .find(|(d, _)| Path::new(d) == dir)
                .map(|(_, names)| names.iter().map(|n| (*n).to_owned()).collect())
                .unwrap_or_default()
        }
    }

    #[test]
    fn debians_postgresql_majors_come_newest_first_and_the_datas_own_before_them() {
        let list = listing(&[("/usr/lib/postgresql", &["15", "9.6", "17", "common", "16"])]);
        let dirs = server_dirs_of(System::Debian, Server::Postgres, None, &[], &list);
        assert_eq!(
            dirs,
            ["17", "16", "15", "9.6"]
                .map(|v| PathBuf::from(format!("/usr/lib/postgresql/{v}/bin")))
        );
        let dirs = server_dirs_of(System::Debian, Server::Postgres, Some("15"), &[], &list);
        assert_eq!(dirs[0], Path::new("/usr/lib/postgresql/15/bin"));
        assert_eq!(dirs.len(), 4);
        // A version that is not installed changes nothing.
        let dirs = server_dirs_of(System::Debian, Server::Postgres, Some("12"), &[], &list);
        assert_eq!(dirs[0], Path::new("/usr/lib/postgresql/17/bin"));
        assert_eq!(
            server_dirs_of(System::Debian, Server::MariaDb, None, &[], &list),
            [Path::new("/usr/sbin"), Path::new("/usr/bin")]
        );
        assert!(server_dirs_of(System::Debian, Server::Redis, None, &[], &list).is_empty());
    }

    #[test]
    fn windows_installers_folders_are_found_under_program_files() {
        let pf = PathBuf::from("C:/Program Files");
        let roots = std::slice::from_ref(&pf);
        let list = listing(&[
            (
                "C:/Program Files",
                &["MariaDB 10.11", "MariaDB 11.4", "PostgreSQL", "Git"],
            ),
            ("C:/Program Files/PostgreSQL", &["16", "17"]),
        ]);
        let pg = server_dirs_of(System::Windows, Server::Postgres, None, roots, &list);
        assert_eq!(
            pg,
            [
                pf.join("PostgreSQL").join("17").join("bin"),
                pf.join("PostgreSQL").join("16").join("bin")
            ]
        );
        let pg = server_dirs_of(System::Windows, Server::Postgres, Some("16"), roots, &list);
        assert_eq!(pg[0], pf.join("PostgreSQL").join("16").join("bin"));
        let maria = server_dirs_of(
            System::Windows,
            Server::MariaDb,
            Some("10.11"),
            roots,
            &list,
        );
        assert_eq!(
            maria,
            [
                pf.join("MariaDB 10.11").join("bin"),
                pf.join("MariaDB 11.4").join("bin")
            ]
        );
        let redis = server_dirs_of(System::Windows, Server::Redis, None, roots, &list);
        assert_eq!(redis, [pf.join("Memurai"), pf.join("Redis")]);
        // No Program Files folder known: nowhere to look but PATH.
        assert!(server_dirs_of(System::Windows, Server::Postgres, None, &[], &list).is_empty());
    }

    #[test]
    fn the_way_to_install_names_the_system_and_its_installer() {
        assert_eq!(
            how_to_install_on(System::Debian, "postgresql"),
            "install postgresql (e.g. `sudo apt-get install postgresql`)"
        );
        for (package, installer) in [
            ("postgresql", "postgresql.org/download/windows"),
            ("mariadb-server", "MSI"),
            ("redis-server", "Memurai"),
        ] {
            let text = how_to_install_on(System::Windows, package);
            assert!(text.starts_with("on Windows"), "{text}");
            assert!(text.contains(installer), "{text}");
        }
    }

    #[test]
    fn a_program_is_found_in_its_folder_by_the_name_it_runs_under() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(program_in(dir.path(), "initdb"), None);
        let file = if cfg!(windows) {
            "initdb.exe"
        } else {
            "initdb"
        };
        std::fs::write(dir.path().join(file), b"").unwrap();
        crate::fs::set_mode(&dir.path().join(file), 0o755).unwrap();
        assert_eq!(
            program_in(dir.path(), "initdb"),
            Some(dir.path().join(file))
        );
    }
}
