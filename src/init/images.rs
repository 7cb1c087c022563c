//! Images: the adapter of a database image, infrastructure binky replaces, commands that
//! only mean something inside an image, and the ports and addresses of the usual images.

/// Image name fragments → the adapter for a service of that image. The first fragment
/// the image's name contains wins, so the more specific come first.
pub(in crate::init) const IMAGE_ADAPTERS: &[(&str, &str)] = &[
    ("pgvector", "postgres"),
    ("postgis", "postgres"),
    ("timescale", "postgres"),
    ("postgres", "postgres"),
    ("mariadb", "mariadb"),
    ("percona", "percona"),
    ("mysql", "mysql"),
    ("mongo", "mongodb"),
    ("valkey", "valkey"),
    ("keydb", "redis"),
    ("redis", "redis"),
    ("clickhouse", "clickhouse"),
    ("minio", "minio"),
    ("rabbitmq", "rabbitmq"),
    ("redpanda", "redpanda"),
    ("kafka", "kafka"),
    ("qdrant", "qdrant"),
    ("opensearch", "opensearch"),
    ("elasticsearch", "elasticsearch"),
];

/// Words in an image's name that make it a tool *around* a server (`redis-commander`,
/// `kafka-ui`, `postgres-exporter`, `opensearch-dashboards`), not the server.
pub(in crate::init) const NOT_A_SERVER: &[&str] = &[
    "admin",
    "adminer",
    "backup",
    "cli",
    "client",
    "commander",
    "connect",
    "console",
    "dashboards",
    "exporter",
    "express",
    "init",
    "insight",
    "kafdrop",
    "manager",
    "mc",
    "migrate",
    "proxy",
    "registry",
    "rest",
    "setup",
    "ui",
    "zookeeper",
];

/// The adapter for a compose `image`, if it is a database or broker binky can slice.
pub fn adapter_for_image(image: &str) -> Option<&'static str> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    let base = last.split(':').next().unwrap_or(last).to_ascii_lowercase();
    let tool_word = ["admin", "commander", "dashboard", "exporter", "insight"];
    if base
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| NOT_A_SERVER.contains(&w))
        || tool_word.iter().any(|w| base.contains(w))
    {
        return None;
    }
    IMAGE_ADAPTERS
        .iter()
        .find(|(needle, _)| base.contains(needle))
        .map(|(_, adapter)| *adapter)
}

/// The server binky runs itself for `adapter` when `admin_url` is left out, if any.
pub(in crate::init) fn managed_server(adapter: &str) -> Option<&'static str> {
    crate::servers::Kind::for_adapter(adapter).map(|kind| match kind {
        crate::servers::Kind::Postgres => "PostgreSQL",
        crate::servers::Kind::Redis => "Redis",
        crate::servers::Kind::Mysql => "MariaDB",
    })
}

/// An example admin address for each adapter, for the notes (never a real credential).
pub(in crate::init) fn admin_example(adapter: &str, host_port: Option<u16>) -> String {
    let (url, port) = match adapter {
        "postgres" => ("postgres://postgres:…@127.0.0.1:{}/postgres", 5432),
        "mysql" | "mariadb" | "percona" => ("mysql://root:…@127.0.0.1:{}", 3306),
        "redis" | "valkey" => ("redis://127.0.0.1:{}", 6379),
        "mongodb" => ("mongodb://root:…@127.0.0.1:{}", 27017),
        "minio" => ("http://…:…@127.0.0.1:{}", 9000),
        "rabbitmq" => ("http://guest:…@127.0.0.1:{}", 15672),
        "kafka" | "redpanda" => ("kafka://127.0.0.1:{}", 9092),
        "qdrant" => ("http://127.0.0.1:{}", 6333),
        "clickhouse" => ("http://default:…@127.0.0.1:{}", 8123),
        _ => ("http://127.0.0.1:{}", 9200),
    };
    url.replace("{}", &host_port.unwrap_or(port).to_string())
}

/// Ports that are HTTP more often than not in a development stack (web UIs among them:
/// Flower's 5555, a mail catcher's 8025 or 1080, pgAdmin's 5050).
pub(in crate::init) fn http_looking(port: u16) -> bool {
    matches!(
        port,
        80 | 81
            | 1080
            | 1313
            | 3000..=3010
            | 4000
            | 4173
            | 4200
            | 4321
            | 5000
            | 5001
            | 5050
            | 5173
            | 5174
            | 5555
            | 6006
            | 7000
            | 8000..=8099
            | 8888
            | 9080
    )
}

/// The label of a non-primary port.
pub(in crate::init) fn port_label(port: u16) -> String {
    match port {
        50051 => "grpc".into(),
        9229 => "inspect".into(),
        5005 | 5678 => "debug".into(),
        25 | 587 | 1025 | 2525 => "smtp".into(),
        24678 => "hmr".into(),
        35729 => "livereload".into(),
        _ => format!("p{port}"),
    }
}

/// The port a URL scheme means when none is written.
pub(in crate::init) fn default_port(scheme: &str) -> Option<u16> {
    Some(match scheme {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        "redis" => 6379,
        "mongodb" => 27017,
        "amqp" => 5672,
        _ => return None,
    })
}

/// Images of infrastructure binky replaces, and what replaces them.
pub(in crate::init) const REPLACED_IMAGES: &[(&str, &str)] = &[
    ("traefik", "Traefik, a reverse proxy"),
    ("nginx-proxy", "nginx-proxy, a reverse proxy"),
    ("caddy-docker-proxy", "Caddy, a reverse proxy"),
    ("caddy", "Caddy, a reverse proxy"),
    ("haproxy", "HAProxy, a reverse proxy"),
    ("envoy", "Envoy, a reverse proxy"),
];

/// A mail catcher: one on the host per world (`shared = true` makes it one for all).
#[derive(Debug, PartialEq, Eq)]
pub(in crate::init) struct MailCatcher {
    /// A fragment of its image's name.
    needle: &'static str,
    /// Its name.
    pub(in crate::init) tool: &'static str,
    /// The program it runs (looked up on `PATH`: [`super::TOOLS`]).
    pub(in crate::init) program: &'static str,
    /// Its command with the image's usual ports (SMTP, then web UI).
    pub(in crate::init) cmd: &'static str,
    /// How to install it on the host.
    pub(in crate::init) install: &'static str,
}

/// The mail catchers binky init knows.
const MAIL_CATCHERS: &[MailCatcher] = &[
    MailCatcher {
        needle: "mailpit",
        tool: "Mailpit",
        program: "mailpit",
        cmd: "mailpit --smtp 127.0.0.1:1025 --listen 127.0.0.1:8025",
        install: "`brew install mailpit`, or its release binary (https://mailpit.axllent.org/docs/install/)",
    },
    MailCatcher {
        needle: "mailhog",
        tool: "MailHog",
        program: "MailHog",
        cmd: "MailHog -smtp-bind-addr 127.0.0.1:1025 -ui-bind-addr 127.0.0.1:8025 -api-bind-addr 127.0.0.1:8025",
        install: "`go install github.com/mailhog/MailHog@latest` (Go), or `brew install mailhog`",
    },
    MailCatcher {
        needle: "maildev",
        tool: "MailDev",
        program: "maildev",
        cmd: "maildev --smtp 1025 --web 1080 --ip 127.0.0.1",
        install: "`npm install -g maildev`",
    },
    MailCatcher {
        needle: "mailcatcher",
        tool: "MailCatcher",
        program: "mailcatcher",
        cmd: "mailcatcher --foreground --ip 127.0.0.1 --smtp-port 1025 --http-port 1080",
        install: "`gem install mailcatcher`",
    },
];

/// The mail catcher `image` runs, if it is one.
pub(in crate::init) fn mail_catcher(image: &str) -> Option<&'static MailCatcher> {
    let path = image
        .split(['@', ':'])
        .next()
        .unwrap_or(image)
        .to_ascii_lowercase();
    let last = path.rsplit('/').next().unwrap_or(&path).to_owned();
    MAIL_CATCHERS.iter().find(|m| last.contains(m.needle))
}

/// What a service that only runs tests is (Playwright, Cypress, a test runner), by its
/// name, image or command: such a service is not part of a running world.
pub(in crate::init) fn test_only(
    name: &str,
    image: Option<&str>,
    command: Option<&str>,
) -> Option<&'static str> {
    let image = image.unwrap_or("").to_ascii_lowercase();
    for (needle, what) in [
        ("playwright", "Playwright's test runner"),
        ("cypress", "Cypress's test runner"),
        ("selenium", "a Selenium browser for tests"),
    ] {
        if image.contains(needle) {
            return Some(what);
        }
    }
    let words: Vec<String> = name
        .to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_owned)
        .collect();
    for (word, what) in [
        ("playwright", "Playwright's test runner"),
        ("cypress", "Cypress's test runner"),
        ("e2e", "end-to-end tests"),
        ("test", "a test runner"),
        ("tests", "a test runner"),
        ("pytest", "a test runner"),
    ] {
        if words.iter().any(|w| w == word) {
            return Some(what);
        }
    }
    let cmd = command.unwrap_or("");
    let runs_tests = [
        "playwright test",
        "cypress run",
        "pytest",
        "npm test",
        "npm run test",
        "vitest run",
        "jest",
    ]
    .iter()
    .any(|t| {
        cmd.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains(t)
    });
    runs_tests.then_some("a test runner")
}

/// What binky replaces an image with, if it is infrastructure binky replaces.
pub(in crate::init) fn replaced_image(image: &str) -> Option<&'static str> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let path = no_digest
        .split(':')
        .next()
        .unwrap_or(no_digest)
        .to_ascii_lowercase();
    let last = path.rsplit('/').next().unwrap_or(&path);
    REPLACED_IMAGES
        .iter()
        .find(|(needle, _)| {
            last == *needle
                || last.starts_with(&format!("{needle}-"))
                || path.ends_with(&format!("/{needle}"))
        })
        .map(|(_, what)| *what)
}

/// Why a compose `command` cannot be a host command, if it cannot: flags handed to the
/// image's entrypoint (`--api.insecure=true`), or a path inside the image (`/start`).
pub(in crate::init) fn image_only_command(cmd: &str) -> Option<String> {
    let first = cmd.split_whitespace().next()?;
    if first.starts_with('-') {
        return Some(format!(
            "compose hands `{}` to its image's entrypoint as flags",
            // One line, as binky.toml writes a command.
            cmd.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    let host_dirs = [
        "/bin/", "/usr/", "/sbin/", "/opt/", "/tmp/", "/home/", "/root/",
    ];
    if first.starts_with('/') && !host_dirs.iter().any(|d| first.starts_with(d)) {
        return Some(format!("compose runs {first}, a path inside its image"));
    }
    None
}

/// The `cmd` binky init writes where it cannot know the command: it fails if run, and
/// `binky check` (and `binky up`) refuse it, naming the service.
pub const TODO_CMD: &str = "TODO: the command that starts";
