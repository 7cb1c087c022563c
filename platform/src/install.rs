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
//! - macOS: Homebrew's formulae under its prefix (`/opt/homebrew` on Apple Silicon,
//!   `/usr/local` on Intel; `$HOMEBREW_PREFIX` first when set), each at
//!   `<prefix>/opt/<formula>/bin` whether it is linked or keg-only: `postgresql@<major>`,
//!   `mariadb` and `mariadb@<version>`, `redis`, `valkey`; and Postgres.app
//!   (`/Applications/Postgres.app/Contents/Versions/<major>/bin`, or in `~/Applications`).
//!   Oracle's MySQL formula is not looked in: MySQL 8 ships no `mysql_install_db`, the tool
//!   binky makes a data directory with, so binky runs MariaDB for the `mysql` kind there too.
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
    /// macOS: Homebrew and Postgres.app.
    MacOs,
}

impl System {
    /// The system binky runs on.
    pub fn current() -> System {
        if cfg!(windows) {
            System::Windows
        } else if cfg!(target_os = "macos") {
            System::MacOs
        } else {
            System::Debian
        }
    }
}

/// The folders macOS' installers put servers under, most preferred first: `homebrew_prefix`
/// (`$HOMEBREW_PREFIX`, when set), Homebrew's prefix for this processor (`/opt/homebrew` on
/// Apple Silicon, `arm`; `/usr/local` on Intel) then the other one (an Intel Homebrew under
/// Rosetta), then the Applications folders Postgres.app is dragged into (`/Applications`,
/// `home`'s).
pub fn macos_roots(arm: bool, homebrew_prefix: Option<&Path>, home: Option<&Path>) -> Vec<PathBuf> {
    let (native, other) = if arm {
        ("/opt/homebrew", "/usr/local")
    } else {
        ("/usr/local", "/opt/homebrew")
    };
    let mut roots: Vec<PathBuf> = homebrew_prefix.map(Path::to_path_buf).into_iter().collect();
    roots.extend(
        [native, other, "/Applications"]
            .iter()
            .map(PathBuf::from)
            .chain(home.map(|h| h.join("Applications"))),
    );
    let mut seen = Vec::new();
    roots.retain(|r| {
        let first = !seen.contains(r);
        seen.push(r.clone());
        first
    });
    roots
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
/// from `%ProgramW6432%`, `%ProgramFiles%`, `%ProgramFiles(x86)%`; macOS' from
/// [`macos_roots`]).
pub fn server_dirs(server: Server, want: Option<&str>) -> Vec<PathBuf> {
    let mut program_files: Vec<PathBuf> = Vec::new();
    if System::current() == System::MacOs {
        let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
        program_files = macos_roots(
            cfg!(target_arch = "aarch64"),
            var("HOMEBREW_PREFIX").as_deref(),
            var("HOME").as_deref(),
        );
    }
    if System::current() == System::Windows {
        for var in ["ProgramW6432", "ProgramFiles", "ProgramFiles(x86)"] {
            if let Some(dir) = std::env::var_os(var).map(PathBuf::from) {
                if !program_files.contains(&dir) {
                    program_files.push(dir);
                }
            }
        }
    }
    server_dirs_of(System::current(), server, want, &program_files, &names_in)
}

/// The names in the folder `dir` (none when it cannot be read): the listing
/// [`server_dirs`] gives [`server_dirs_of`].
pub fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The folders where `system`'s installers put `server`'s programs, most preferred first,
/// given `list` (the names in a folder) and `program_files`, the folders the installers
/// put things under: Windows' Program Files folders, macOS' [`macos_roots`] (unused on
/// Debian). For PostgreSQL and MariaDB, one folder per installed version: `want` first
/// when it is installed, then the newest to the oldest (on macOS PostgreSQL's versions of
/// Homebrew and Postgres.app together; MariaDB's unversioned formula, the newest release,
/// first).
pub fn server_dirs_of(
    system: System,
    server: Server,
    want: Option<&str>,
    program_files: &[PathBuf],
    list: &dyn Fn(&Path) -> Vec<String>,
) -> Vec<PathBuf> {
    match (system, server) {
        (System::MacOs, Server::Postgres) => macos_postgres(program_files, want, list),
        (System::MacOs, Server::MariaDb) => macos_formulae(program_files, "mariadb", want, list),
        (System::MacOs, Server::Redis) => program_files
            .iter()
            .flat_map(|root| {
                let mut dirs = macos_formulae(std::slice::from_ref(root), "redis", None, list);
                dirs.push(root.join("opt").join("valkey").join("bin"));
                dirs
            })
            .collect(),
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

/// Homebrew's `<root>/opt/<formula>/bin` then `<root>/opt/<formula>@<version>/bin` (`want`
/// first, then the newest), for each of `roots` in turn (a Homebrew prefix is a root; a
/// root without `opt` adds its unversioned folder only, which is not there).
fn macos_formulae(
    roots: &[PathBuf],
    formula: &str,
    want: Option<&str>,
    list: &dyn Fn(&Path) -> Vec<String>,
) -> Vec<PathBuf> {
    roots
        .iter()
        .flat_map(|root| {
            let opt = root.join("opt");
            let versioned = by_version(list(&opt), &format!("{formula}@"), want);
            std::iter::once(formula.to_owned())
                .chain(versioned)
                .map(move |name| opt.join(name).join("bin"))
        })
        .collect()
}

/// PostgreSQL's folders under `roots` on macOS: Homebrew's `opt/postgresql@<major>/bin`,
/// Postgres.app's `Postgres.app/Contents/Versions/<major>/bin` (not its `latest` link, one
/// of the others), all versions together `want` first then newest to oldest, a root
/// before the next for the same version; then Homebrew's old unversioned `postgresql`
/// formula (PostgreSQL 14), whose version its name does not say.
fn macos_postgres(
    roots: &[PathBuf],
    want: Option<&str>,
    list: &dyn Fn(&Path) -> Vec<String>,
) -> Vec<PathBuf> {
    let mut found: Vec<(Vec<u32>, String, PathBuf)> = Vec::new();
    let mut unversioned = Vec::new();
    for root in roots {
        let opt = root.join("opt");
        let names = list(&opt);
        for name in &names {
            let Some(version) = name.strip_prefix("postgresql@") else {
                continue;
            };
            if let Some(key) = version_key(version) {
                found.push((key, version.to_owned(), opt.join(name).join("bin")));
            }
        }
        if names.iter().any(|n| n == "postgresql") {
            unversioned.push(opt.join("postgresql").join("bin"));
        }
        let versions = root.join("Postgres.app").join("Contents").join("Versions");
        for version in list(&versions) {
            if let Some(key) = version_key(&version) {
                let dir = versions.join(&version).join("bin");
                found.push((key, version, dir));
            }
        }
    }
    // Stable: for one version, the roots' order stays.
    found.sort_by(|a, b| b.0.cmp(&a.0));
    if let Some(i) = want.and_then(|w| found.iter().position(|(_, v, _)| v == w)) {
        let wanted = found.remove(i);
        found.insert(0, wanted);
    }
    found
        .into_iter()
        .map(|(_, _, dir)| dir)
        .chain(unversioned)
        .collect()
}

/// A version's numbers (`11.4` is `[11, 4]`), `None` for what is not one (`latest`).
fn version_key(text: &str) -> Option<Vec<u32>> {
    text.split('.').map(|p| p.parse().ok()).collect()
}

/// The names of `names` that are `prefix` and a version (`16`, `11.4`), `want`'s first
/// (the version alone, or the whole name), then the highest version to the lowest.
fn by_version(names: Vec<String>, prefix: &str, want: Option<&str>) -> Vec<String> {
    let mut versions: Vec<(Vec<u32>, String)> = names
        .into_iter()
        .filter_map(|name| {
            let key = version_key(name.strip_prefix(prefix)?)?;
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
        System::MacOs => match package {
            "postgresql" => "on macOS, install PostgreSQL with Homebrew (`brew install \
                 postgresql@17`) or Postgres.app (https://postgresapp.com), which binky finds \
                 under /opt/homebrew/opt (Intel: /usr/local/opt) and \
                 /Applications/Postgres.app"
                .to_owned(),
            "mariadb-server" => "on macOS, install MariaDB with Homebrew (`brew install \
                 mariadb`; Oracle's `mysql` formula lacks the install tool binky needs), which \
                 binky finds under /opt/homebrew/opt (Intel: /usr/local/opt)"
                .to_owned(),
            "redis-server" => "on macOS, install Redis with Homebrew (`brew install redis`, or \
                 `brew install valkey`), which binky finds under /opt/homebrew/opt (Intel: \
                 /usr/local/opt)"
                .to_owned(),
            other => format!("on macOS, install {other} (e.g. `brew install {other}`) and put its folder on PATH"),
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
    fn macos_looks_in_the_homebrew_prefix_of_its_processor_first_then_the_applications() {
        let arm = macos_roots(true, None, Some(Path::new("/Users/me")));
        assert_eq!(
            arm,
            [
                "/opt/homebrew",
                "/usr/local",
                "/Applications",
                "/Users/me/Applications"
            ]
            .map(PathBuf::from)
        );
        let intel = macos_roots(false, None, None);
        assert_eq!(
            intel,
            ["/usr/local", "/opt/homebrew", "/Applications"].map(PathBuf::from)
        );
        // `$HOMEBREW_PREFIX` first, once.
        let set = macos_roots(true, Some(Path::new("/opt/homebrew")), None);
        assert_eq!(
            set,
            ["/opt/homebrew", "/usr/local", "/Applications"].map(PathBuf::from)
        );
        let custom = macos_roots(false, Some(Path::new("/Users/me/brew")), None);
        assert_eq!(custom[0], Path::new("/Users/me/brew"));
    }

    /// Makes the folders `dirs` (relative) under `root`, each with the programs `programs`.
    #[cfg(unix)]
    fn tree(root: &Path, dirs: &[&str], programs: &[&str]) {
        for dir in dirs {
            let dir = root.join(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for program in programs {
                std::fs::write(dir.join(program), b"#!/bin/sh\n").unwrap();
                crate::fs::set_mode(&dir.join(program), 0o755).unwrap();
            }
        }
    }

    // macOS's paths are Unix paths: on Windows `Path::join` writes a backslash between them and an
    // executable needs `.exe`, so these run on Unix (Linux in CI).
    #[cfg(unix)]
    #[test]
    fn macos_finds_homebrews_formulae_and_postgres_app_in_a_tree_on_disk() {
        let disk = tempfile::tempdir().unwrap();
        let (arm, intel, apps) = (
            disk.path().join("opt/homebrew"),
            disk.path().join("usr/local"),
            disk.path().join("Applications"),
        );
        tree(
            &arm,
            &[
                "opt/postgresql@16/bin",
                "opt/postgresql@17/bin",
                "opt/postgresql/bin",
            ],
            &["initdb", "postgres"],
        );
        tree(
            &arm,
            &["opt/mariadb/bin", "opt/mariadb@10.11/bin"],
            &["mariadbd"],
        );
        tree(&arm, &["opt/redis/bin"], &["redis-server"]);
        // An Intel Homebrew left beside it, under Rosetta.
        tree(
            &intel,
            &["opt/postgresql@15/bin", "opt/mariadb@11.4/bin"],
            &["postgres"],
        );
        tree(
            &apps,
            &[
                "Postgres.app/Contents/Versions/18/bin",
                "Postgres.app/Contents/Versions/16/bin",
            ],
            &["initdb", "postgres"],
        );
        // Postgres.app's `latest` is a link to one of its versions, no version itself.
        std::fs::create_dir_all(apps.join("Postgres.app/Contents/Versions/latest")).unwrap();
        let roots = [arm.clone(), intel.clone(), apps.clone()];
        let pg = server_dirs_of(System::MacOs, Server::Postgres, None, &roots, &names_in);
        assert_eq!(
            pg,
            [
                apps.join("Postgres.app/Contents/Versions/18/bin"),
                arm.join("opt/postgresql@17/bin"),
                arm.join("opt/postgresql@16/bin"),
                apps.join("Postgres.app/Contents/Versions/16/bin"),
                intel.join("opt/postgresql@15/bin"),
                arm.join("opt/postgresql/bin"),
            ]
        );
        // The data's own major first, wherever it is installed.
        let pg = server_dirs_of(
            System::MacOs,
            Server::Postgres,
            Some("15"),
            &roots,
            &names_in,
        );
        assert_eq!(pg[0], intel.join("opt/postgresql@15/bin"));
        assert_eq!(pg.len(), 6);
        let maria = server_dirs_of(System::MacOs, Server::MariaDb, None, &roots, &names_in);
        assert_eq!(
            &maria[..3],
            [
                arm.join("opt/mariadb/bin"),
                arm.join("opt/mariadb@10.11/bin"),
                intel.join("opt/mariadb/bin"),
            ]
        );
        assert!(
            maria.contains(&intel.join("opt/mariadb@11.4/bin")),
            "{maria:?}"
        );
        let found = maria.iter().find_map(|d| program_in(d, "mariadbd"));
        assert_eq!(found, Some(arm.join("opt/mariadb/bin/mariadbd")));
        let redis = server_dirs_of(System::MacOs, Server::Redis, None, &roots, &names_in);
        assert_eq!(
            &redis[..2],
            [arm.join("opt/redis/bin"), arm.join("opt/valkey/bin")]
        );
        let found = redis.iter().find_map(|d| program_in(d, "redis-server"));
        assert_eq!(found, Some(arm.join("opt/redis/bin/redis-server")));
        // Nothing installed: nowhere but PATH.
        let empty = tempfile::tempdir().unwrap();
        let pg = server_dirs_of(
            System::MacOs,
            Server::Postgres,
            None,
            &[empty.path().to_path_buf()],
            &names_in,
        );
        assert!(pg.is_empty(), "{pg:?}");
    }

    #[test]
    fn the_way_to_install_names_the_system_and_its_installer() {
        for (package, says) in [
            ("postgresql", "`brew install postgresql@17`"),
            ("mariadb-server", "`brew install mariadb`"),
            ("redis-server", "`brew install redis`"),
        ] {
            let text = how_to_install_on(System::MacOs, package);
            assert!(text.starts_with("on macOS"), "{text}");
            assert!(text.contains(says), "{text}");
        }
        assert!(how_to_install_on(System::MacOs, "postgresql").contains("Postgres.app"));
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
