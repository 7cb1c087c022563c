use std::path::Path;

use binky_controllers::admission::{check_spec, Verdict};

use super::images::IMAGE_ADAPTERS;
use super::secrets::{scan_urls, url_password};
use super::toml_out::{q, toml_key, toml_list};
use super::values::rebase;
use super::write::compose_duration;
use super::{
    adapter_for_image, env_file_paths, generate, project_name, ComposeSource, Generated, Repo,
};

/// A project `shop` with `compose` as its docker-compose.yml.
fn repo_with(compose: &str, dotenv: Option<&str>) -> Repo {
    Repo {
        dir_name: "shop".into(),
        compose: Some(ComposeSource {
            name: "docker-compose.yml".into(),
            text: compose.into(),
        }),
        dotenv: dotenv.map(str::to_owned),
        ..Repo::default()
    }
}

fn generate_with(compose: &str, dotenv: Option<&str>) -> Generated {
    generate(&repo_with(compose, dotenv)).unwrap_or_else(|e| panic!("{e}\n{compose}"))
}

/// binky's own parser and admission accept it; the TOML as a table.
fn valid(g: &Generated) -> toml::Table {
    let loaded = crate::config::parse(&g.toml, Path::new("binky.toml"))
        .unwrap_or_else(|e| panic!("{e}\n---\n{}", g.toml));
    assert_eq!(check_spec(&loaded.spec, None), Verdict::Admit, "{}", g.toml);
    toml::from_str(&g.toml).unwrap()
}

fn svc<'t>(t: &'t toml::Table, name: &str) -> &'t toml::Table {
    t["services"][name]
        .as_table()
        .unwrap_or_else(|| panic!("no service {name}"))
}

fn string<'t>(t: &'t toml::Table, path: &[&str]) -> &'t str {
    let mut v = &t[path[0]];
    for k in &path[1..] {
        v = &v[*k];
    }
    v.as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string: {v:?}"))
}

fn absent(g: &Generated, secret: &str) {
    assert!(!g.toml.contains(secret), "{secret} in:\n{}", g.toml);
    let notes = format!("{:?}{:?}{:?}", g.mapped, g.to_decide, g.to_set);
    assert!(!notes.contains(secret), "{secret} in the notes: {notes}");
}

#[test]
fn every_image_maps_to_a_built_in_adapter() {
    // init writes no `binky-adapter-<name>` note: an image mapped to an adapter binky
    // does not ship would need one.
    // The adapters' descriptor takes the name as `binky.toml` gives it, for a built-in one.
    for (_, adapter) in IMAGE_ADAPTERS {
        let read = crate::adapters::kind::AdapterName::parse(adapter);
        assert!(
            read.is_ok_and(|r| r.kind.is_some()),
            "{adapter} is not built in"
        );
    }
}

#[test]
fn database_and_broker_images_become_adapter_services() {
    for (image, adapter) in [
        ("postgres:16-alpine", "postgres"),
        ("postgis/postgis:16-3.4", "postgres"),
        ("timescale/timescaledb:latest-pg16", "postgres"),
        ("pgvector/pgvector:pg16", "postgres"),
        ("docker.io/library/postgres@sha256:abc", "postgres"),
        ("mysql:8", "mysql"),
        ("mariadb:11", "mariadb"),
        ("percona:8", "percona"),
        ("redis:7", "redis"),
        ("redis/redis-stack-server", "redis"),
        ("valkey/valkey:8", "valkey"),
        ("eqalpha/keydb", "redis"),
        ("mongo:7", "mongodb"),
        ("bitnami/mongodb", "mongodb"),
        ("clickhouse/clickhouse-server:24", "clickhouse"),
        ("minio/minio", "minio"),
        ("rabbitmq:3-management", "rabbitmq"),
        ("confluentinc/cp-kafka:7.6.0", "kafka"),
        ("redpandadata/redpanda", "redpanda"),
        ("qdrant/qdrant", "qdrant"),
        (
            "docker.elastic.co/elasticsearch/elasticsearch:8.13.0",
            "elasticsearch",
        ),
        ("opensearchproject/opensearch:2", "opensearch"),
    ] {
        assert_eq!(adapter_for_image(image), Some(adapter), "{image}");
    }
    for tool in [
        "rediscommander/redis-commander",
        "redis/redisinsight",
        "provectuslabs/kafka-ui",
        "mongo-express",
        "dpage/pgadmin4",
        "prometheuscommunity/postgres-exporter",
        "opensearchproject/opensearch-dashboards",
        "minio/mc",
        "nginx:alpine",
        "mailhog/mailhog",
    ] {
        assert_eq!(adapter_for_image(tool), None, "{tool}");
    }
}

#[test]
fn adapter_services_binky_can_run_itself_get_no_admin_url() {
    let g = generate_with(
        r#"
services:
  db:
    image: postgres:16
    environment: { POSTGRES_PASSWORD: hunter2-db-Pw }
    ports: ["5433:5432"]
  cache: { image: "valkey/valkey:8" }
"#,
        None,
    );
    let t = valid(&g);
    crate::apply::validate(&g.toml, Path::new("binky.toml"), None)
        .unwrap_or_else(|e| panic!("{e}\n{}", g.toml));
    // binky runs PostgreSQL and Redis itself: no admin_url, nothing to set; the comment
    // says how to point at a server of one's own (compose's published port as example).
    assert_eq!(string(&t, &["services", "db", "adapter"]), "postgres");
    assert!(!svc(&t, "db").contains_key("admin_url"), "{}", g.toml);
    assert_eq!(string(&t, &["services", "cache", "adapter"]), "valkey");
    assert!(!svc(&t, "cache").contains_key("admin_url"), "{}", g.toml);
    assert!(g.toml.contains("# binky runs PostgreSQL for it, from the installed binaries. To use a server you\n# already run instead: admin_url = \"${env.DB_ADMIN_URL}\" (e.g. postgres://postgres:…@127.0.0.1:5433/postgres)."), "{}", g.toml);
    assert!(g.toml.contains("# binky runs Redis for it"));
    assert!(g.to_set.is_empty(), "{:?}", g.to_set);
    assert!(!g.toml.contains("Set before"), "{}", g.toml);
    // The container's settings are not the slice's.
    absent(&g, "hunter2-db-Pw");
    assert!(!svc(&t, "db").contains_key("env"));
    assert_eq!(g.adapters, ["postgres", "valkey"]);
}

#[test]
fn adapters_without_a_managed_server_say_they_need_an_admin_url() {
    let g = generate_with(
            "services:\n  mysql: { image: 'mysql:8' }\n  search: { image: 'opensearchproject/opensearch:2' }\n",
            None,
        );
    let t = valid(&g);
    assert_eq!(string(&t, &["services", "mysql", "adapter"]), "mysql");
    assert_eq!(
        string(&t, &["services", "search", "admin_url"]),
        "${env.SEARCH_ADMIN_URL}"
    );
    // Both are built in: no external adapter is asked for.
    assert!(!g.toml.contains("binky-adapter-"), "{}", g.toml);
    assert!(!svc(&t, "mysql").contains_key("admin_url"), "{}", g.toml);
    assert!(g.toml.contains("# binky runs MariaDB for it"), "{}", g.toml);
    assert!(g.toml.contains(
        "# binky runs only PostgreSQL, Redis and MariaDB itself when admin_url is left out."
    ));
}

#[test]
fn a_command_string_or_list_becomes_cmd() {
    let g = generate_with(
        r#"
services:
  api: { build: ., command: "npm run start -- --verbose" }
  job:
    build: .
    command: ["python", "-c", "print('hi there')", "--flag=$$HOME"]
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "api", "cmd"]),
        "npm run start -- --verbose"
    );
    assert_eq!(
        string(&t, &["services", "job", "cmd"]),
        r#"python -c 'print('\''hi there'\'')' '--flag=$HOME'"#
    );
}

#[test]
fn a_reverse_proxy_is_left_out_and_image_flags_or_paths_never_become_a_cmd() {
    let compose = r#"
services:
  traefik:
    image: traefik:v3.1
    command: --api.insecure=true --providers.docker=true --entrypoints.web.address=:80
    ports: ["80:80", "8080:8080"]
  django:
    build: { context: ., dockerfile: ./compose/local/django/Dockerfile }
    command: /start
    ports: ["8000:8000"]
    depends_on: [traefik]
    environment:
      SENTRY_DSN: ${SENTRY_DSN:-}
  celeryworker:
    build: .
    command: /start-celeryworker
"#;
    let g = generate_with(compose, None);
    let t = valid(&g);
    let services = t["services"].as_table().unwrap();
    assert!(!services.contains_key("traefik"), "{}", g.toml);
    assert!(
        g.toml
            .contains("# traefik (Traefik, a reverse proxy) is left out"),
        "{}",
        g.toml
    );
    assert!(g.mapped.iter().any(|m| m.starts_with("traefik: left out")));
    // Nothing depends on what is left out.
    assert!(
        t["services"]["django"].get("depends_on").is_none(),
        "{}",
        g.toml
    );
    for svc in ["django", "celeryworker"] {
        assert!(
            string(&t, &["services", svc, "cmd"]).starts_with("TODO: the command that starts"),
            "{}",
            g.toml
        );
    }
    assert!(
        g.toml
            .contains("compose runs /start, a path inside its image"),
        "{}",
        g.toml
    );
    // An optional credential stays optional.
    assert_eq!(
        string(&t, &["services", "django", "env", "SENTRY_DSN"]),
        "${env.SENTRY_DSN:-}"
    );
    let findings = crate::check::check(&g.toml, std::path::Path::new("binky.toml"));
    let todos: Vec<&str> = findings
        .iter()
        .filter(|f| f.code == "todo")
        .map(|f| f.key.as_str())
        .collect();
    assert_eq!(
        todos,
        vec!["services.celeryworker.cmd", "services.django.cmd"]
    );
}

#[test]
fn a_service_compose_only_builds_gets_a_placeholder_that_fails_and_a_todo() {
    let g = generate_with(
        "services:\n  web:\n    build: { context: ./web }\n    ports: ['3000:3000']\n",
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "TODO: the command that starts web on the host"
    );
    assert!(g.toml.contains("# TODO: the command that starts web"));
    // binky check (and so binky up) refuses it, naming the service.
    let findings = crate::check::check(&g.toml, std::path::Path::new("binky.toml"));
    assert!(
        findings
            .iter()
            .any(|f| f.code == "todo" && f.key == "services.web.cmd"),
        "{findings:?}"
    );
    assert!(g
        .to_decide
        .iter()
        .any(|l| l.starts_with("web: set `cmd`") && l.contains("${self.port}")));
    assert!(g
        .toml
        .lines()
        .any(|l| l.starts_with("# TODO: web: set `cmd`")));
}

#[test]
fn an_http_port_becomes_a_url_and_other_ports_become_labels() {
    let g = generate_with(
        r#"
services:
  web: { build: ., command: "serve -l 80", ports: ["8080:80"] }
  api: { build: ., command: "api --http 8000 --grpc 50051", ports: ["50051:50051", "8000:8000"] }
  metrics: { build: ., command: "exporter --listen :9100", expose: ["9100"] }
  dns: { build: ., command: "dnsd", ports: ["5353:53/udp"] }
  worker: { build: ., command: "work" }
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(svc(&t, "web")["url"].as_bool(), Some(true));
    assert!(!svc(&t, "web").contains_key("ports"));
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "serve -l ${self.port}"
    );
    assert_eq!(string(&t, &["services", "api", "url", "http"]), "api");
    let ports: Vec<&str> = svc(&t, "api")["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(ports, ["http", "grpc"]);
    assert_eq!(
        string(&t, &["services", "api", "cmd"]),
        "api --http ${self.port} --grpc ${self.grpc}"
    );
    assert!(!svc(&t, "metrics").contains_key("url"));
    assert_eq!(svc(&t, "metrics")["ports"][0].as_str(), Some("p9100"));
    assert_eq!(
        string(&t, &["services", "metrics", "cmd"]),
        "exporter --listen :${self.port}"
    );
    assert!(!svc(&t, "worker").contains_key("ports"));
    assert!(!svc(&t, "dns").contains_key("ports"));
    assert!(g
        .to_decide
        .iter()
        .any(|l| l.starts_with("dns: ports 5353:53/udp")));
}

#[test]
fn the_container_port_in_command_and_environment_becomes_self_port() {
    let g = generate_with(
        r#"
services:
  api:
    build: .
    command: gunicorn -b 0.0.0.0:8000 --timeout 80000 app:app
    ports: ["8000"]
    environment:
      PORT: 8000
      PUBLIC_URL: http://localhost:8000/app
      TIMEOUT_MS: 8000
      VERSION: "1.8000"
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "api", "cmd"]),
        "gunicorn -b 0.0.0.0:${self.port} --timeout 80000 app:app"
    );
    let env = |k: &str| string(&t, &["services", "api", "env", k]).to_owned();
    assert_eq!(env("PORT"), "${self.port}");
    assert_eq!(env("PUBLIC_URL"), "http://localhost:${self.port}/app");
    assert_eq!(env("TIMEOUT_MS"), "8000");
    assert_eq!(env("VERSION"), "1.8000");
}

#[test]
fn depends_on_keeps_only_services_in_the_file_in_either_form() {
    let g = generate_with(
        r#"
services:
  db: { image: postgres }
  mail: { image: grafana/loki }
  api:
    build: .
    depends_on:
      db: { condition: service_healthy }
      mail: { condition: service_started }
  web: { build: ., depends_on: [api, mail, db] }
"#,
        None,
    );
    let t = valid(&g);
    let deps = |s: &str| -> Vec<String> {
        svc(&t, s)["depends_on"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(deps("api"), ["db"]);
    assert_eq!(deps("web"), ["api", "db"]);
    assert!(!t["services"].as_table().unwrap().contains_key("mail"));
    assert!(g
        .to_decide
        .iter()
        .any(|l| l.starts_with("mail: runs image grafana/loki")));
    assert!(g
        .mapped
        .iter()
        .any(|l| l.contains("depends_on mail dropped")));
}

#[test]
fn build_context_and_a_mounted_working_dir_become_workdir() {
    let g = generate_with(
        r#"
services:
  api:
    build: { context: ./services/api, dockerfile: Dockerfile.dev }
    command: make run
    env_file: [.env, ./services/api/.env.local, { path: ./shared.env, required: false }]
  web:
    image: node:20
    working_dir: /app/site
    volumes: ["./frontend:/app", "node_modules:/app/node_modules"]
    command: npm run dev
  root: { build: ., command: make }
  outside: { build: ../shared, command: make }
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(string(&t, &["services", "api", "workdir"]), "services/api");
    let files: Vec<&str> = svc(&t, "api")["env_file"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(files, ["../../.env", ".env.local", "../../shared.env"]);
    assert_eq!(string(&t, &["services", "web", "workdir"]), "frontend/site");
    assert!(g.mapped.iter().any(|l| l.contains("not in node:20")));
    assert!(!svc(&t, "root").contains_key("workdir"));
    assert!(!svc(&t, "outside").contains_key("workdir"));
    assert!(g
        .to_decide
        .iter()
        .any(|l| l.starts_with("outside: its code is in ../shared")));
    assert!(g
        .to_decide
        .iter()
        .any(|l| l.starts_with("web: volumes ./frontend:/app")));
}

#[test]
fn addresses_of_compose_services_become_tokens() {
    let g = generate_with(
        r#"
services:
  db:
    image: postgres:16
  cache:
    image: redis:7
  api:
    build: ./api
    command: ./serve --db postgres://app:app@db:5432/app
    expose: [8000]
    environment:
      DATABASE_URL: postgres://app:pw-for-db-1@db:5432/app
      REDIS_URL: redis://cache:6379/0
      REDIS_HOST: cache
  web:
    build: ./web
    command: npm start
    environment:
      API_URL: http://api:8000/v1
      VITE_API_URL: http://api:8000/v1
      CORS_ALLOWED_ORIGINS: http://api:8000
      API_WS: ws://api:8000/ws
      API_ADDR: api:8000
      API_HOST: api
      ADMIN_URL: http://admin:9000
  ingest:
    build: .
    command: ingest
    environment:
      PGHOST: db
      PGPORT: "5432"
      PGUSER: app
      PGPASSWORD: pw-for-db-1
      PGDATABASE: app
  admin: { build: ., command: "admin --port 9000" }
"#,
        None,
    );
    let t = valid(&g);
    crate::apply::validate(&g.toml, Path::new("binky.toml"), None).unwrap();
    let env = |s: &str, k: &str| string(&t, &["services", s, "env", k]).to_owned();
    assert_eq!(env("api", "DATABASE_URL"), "${db.url}");
    assert_eq!(env("api", "REDIS_URL"), "${cache.url}");
    // An address in parts names the slice's parts, for Redis as for PostgreSQL.
    assert_eq!(env("api", "REDIS_HOST"), "${cache.host}");
    assert!(!g
        .to_decide
        .iter()
        .any(|l| l.starts_with("api: env REDIS_HOST")));
    assert_eq!(
        string(&t, &["services", "api", "cmd"]),
        "./serve --db ${db.url}"
    );
    assert_eq!(env("web", "API_URL"), "${api.url}/v1");
    // What a browser reads gets the proxy URL, which it can resolve.
    assert_eq!(env("web", "VITE_API_URL"), "${api.proxy_url}/v1");
    assert_eq!(env("web", "CORS_ALLOWED_ORIGINS"), "${api.proxy_url}");
    assert_eq!(env("web", "API_WS"), "ws://localhost:${api.port}/ws");
    assert_eq!(env("web", "API_ADDR"), "localhost:${api.port}");
    assert_eq!(env("web", "API_HOST"), "localhost");
    // Reached on a port it did not publish: the port is its, and HTTP makes it a URL.
    assert_eq!(svc(&t, "admin")["url"].as_bool(), Some(true));
    assert_eq!(env("web", "ADMIN_URL"), "${admin.url}");
    assert_eq!(
        string(&t, &["services", "admin", "cmd"]),
        "admin --port ${self.port}"
    );
    for (k, field) in [
        ("PGHOST", "host"),
        ("PGPORT", "port"),
        ("PGUSER", "user"),
        ("PGPASSWORD", "password"),
        ("PGDATABASE", "database"),
    ] {
        assert_eq!(env("ingest", k), format!("${{db.{field}}}"));
    }
    absent(&g, "pw-for-db-1");
}

#[test]
fn credentials_are_never_written() {
    // Token shapes are made at run time, so that no scanner mistakes this file for a leak.
    let github = format!("ghp_{}", "aB3dE6gH9k".repeat(4));
    let stripe = format!("sk_live_{}", "Zq8Wm2Xr".repeat(3));
    let jwt = format!(
        "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
        "zdWIiOiIxMjM0", "dozjgNryP4J3jVmNHl0w5N"
    );
    let aws = format!("AKIA{}", "QWERTYUIOP123456");
    let compose = format!(
        r#"
services:
  db:
    image: postgres
    environment:
      POSTGRES_PASSWORD: db-Root-pw-777
  api:
    build: .
    command: ./run --admin-password db-Root-pw-777 --token {github} --dsn postgres://ro:Ext3rnal-pw@warehouse.example.com/dw --api-key=Lit3ral-key-1
    environment:
      SECRET_KEY_BASE: a-long-rails-secret-value
      GH: {github}
      PAYMENTS: {stripe}
      AUTH_HEADER: "Bearer {jwt}"
      AWS_ACCESS_KEY_ID: {aws}
      WAREHOUSE_URL: postgres://ro:Ext3rnal-pw@warehouse.example.com/dw
      SMTP_PASS: mail-Pw-5150
      API_TOKEN: ${{API_TOKEN}}
      SESSION_SECRET: ${{SESSION_SECRET:-fallback-Session-9}}
      COPY: db-Root-pw-777
      LOG_LEVEL: info
    healthcheck:
      test: ["CMD-SHELL", "REDIS_PASS=hc-Only-pw-3 check --password mail-Pw-5150"]
"#
    );
    let dotenv = "API_TOKEN=env-Token-31337\nSESSION_SECRET=dotenv-Session-42\n";
    let g = generate_with(&compose, Some(dotenv));
    let t = valid(&g);
    for secret in [
        "db-Root-pw-777",
        github.as_str(),
        stripe.as_str(),
        jwt.as_str(),
        aws.as_str(),
        "Ext3rnal-pw",
        "a-long-rails-secret-value",
        "mail-Pw-5150",
        "env-Token-31337",
        "fallback-Session-9",
        "dotenv-Session-42",
        "Lit3ral-key-1",
        "hc-Only-pw-3",
    ] {
        absent(&g, secret);
    }
    let env = |k: &str| string(&t, &["services", "api", "env", k]).to_owned();
    for (k, var) in [
        ("SECRET_KEY_BASE", "SECRET_KEY_BASE"),
        ("GH", "GH"),
        ("PAYMENTS", "PAYMENTS"),
        ("AUTH_HEADER", "AUTH_HEADER"),
        ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
        ("WAREHOUSE_URL", "WAREHOUSE_URL"),
        ("SMTP_PASS", "SMTP_PASS"),
        ("API_TOKEN", "API_TOKEN"),
        ("SESSION_SECRET", "SESSION_SECRET"),
        ("COPY", "COPY"),
    ] {
        assert_eq!(env(k), format!("${{env.{var}}}"), "{k}");
        assert!(
            g.to_set.iter().any(|(n, _)| n == var),
            "{var} not in to_set"
        );
    }
    assert_eq!(env("LOG_LEVEL"), "info");
    let cmd = string(&t, &["services", "api", "cmd"]);
    assert!(
        cmd.starts_with("./run --admin-password ${env.POSTGRES_PASSWORD} --token ${env."),
        "{cmd}"
    );
    assert!(g.toml.contains("looked like a credential"));
}

#[test]
fn credential_values_that_are_also_names_do_not_break_the_file() {
    let g = generate_with(
        r#"
services:
  rabbitmq:
    image: rabbitmq:3
    environment: { RABBITMQ_DEFAULT_PASS: rabbitmq }
  db:
    image: postgres
    environment: { POSTGRES_PASSWORD: shop }
  backup:
    build: .
    command: pg_dump --no-password --password-file /run/pw backup && sh -c "login --password 'Qu0ted-pw-1'"
    environment: { BACKUP_TOKEN: backup, AMQP: "amqp://u:p4ss-w0rd@rabbitmq:5672" }
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(string(&t, &["project", "name"]), "shop");
    assert_eq!(string(&t, &["services", "rabbitmq", "adapter"]), "rabbitmq");
    assert_eq!(
            string(&t, &["services", "backup", "cmd"]),
            "pg_dump --no-password --password-file /run/pw backup && sh -c \"login --password '${env.BACKUP_PASSWORD}'\""
        );
    absent(&g, "Qu0ted-pw-1");
    assert_eq!(
        string(&t, &["services", "backup", "env", "BACKUP_TOKEN"]),
        "${env.BACKUP_TOKEN}"
    );
    assert_eq!(
        string(&t, &["services", "backup", "env", "AMQP"]),
        "${rabbitmq.url}"
    );
    absent(&g, "p4ss-w0rd");
}

#[test]
fn dotenv_values_are_understood_but_secrets_stay_references() {
    let g = generate_with(
        r#"
services:
  web:
    build: .
    command: next dev -p ${WEB_PORT:-3000}
    ports: ["${WEB_PORT:-3000}:${WEB_PORT:-3000}"]
    environment:
      APP_NAME: ${APP_NAME}
      REGION: ${REGION:-eu}
      FEATURE: ${FEATURE_FLAG}
      DATABASE_URL: postgres://app:${DB_PASSWORD}@db.internal:5432/app
"#,
        Some("WEB_PORT=4000\nAPP_NAME=shop\nDB_PASSWORD=dotenv-Db-pw-8\n"),
    );
    let t = valid(&g);
    assert_eq!(svc(&t, "web")["url"].as_bool(), Some(true));
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "next dev -p ${self.port}"
    );
    let env = |k: &str| string(&t, &["services", "web", "env", k]).to_owned();
    assert_eq!(env("APP_NAME"), "shop");
    assert_eq!(env("REGION"), "eu");
    assert_eq!(env("FEATURE"), "${env.FEATURE_FLAG}");
    assert_eq!(
        env("DATABASE_URL"),
        "postgres://app:${env.DB_PASSWORD}@db.internal:5432/app"
    );
    absent(&g, "dotenv-Db-pw-8");
    let reason = |n: &str| g.to_set.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert!(reason("FEATURE_FLAG").contains(".env does not set it"));
    assert!(reason("DB_PASSWORD").contains("credential"));
    assert!(g
        .toml
        .starts_with("# binky.toml, written by `binky init` from docker-compose.yml and .env."));
}

#[test]
fn what_binky_cannot_map_is_listed_to_decide() {
    let g = generate_with(
        r#"
services:
  db:
    image: postgres
    volumes: [pgdata:/var/lib/postgresql/data, ./init.sql:/docker-entrypoint-initdb.d/init.sql]
    command: postgres -c max_connections=500
  api:
    build: .
    command: serve
    entrypoint: /entry.sh
    healthcheck: { test: ["CMD-SHELL", "pg_isready -h db"] }
    volumes: [./src:/app/src]
    networks: [back]
    profiles: [debug]
    deploy: { replicas: 3 }
    extends: { file: common.yml, service: base }
    secrets: [api_key]
    cap_add: [NET_ADMIN]
    privileged: true
volumes: { pgdata: {} }
networks: { back: {} }
secrets: { api_key: { file: ./api_key.txt } }
"#,
        None,
    );
    valid(&g);
    for start in [
        "db: ./init.sql is mounted into /docker-entrypoint-initdb.d/init.sql",
        "db: its `command`",
        "api: entrypoint not carried",
        "api: healthcheck `pg_isready -h db` not translated",
        "api: volumes ./src:/app/src not carried",
        "api: profiles debug",
        "api: deploy not carried",
        "api: extends not resolved",
        "api: secrets not carried",
        "api: cap_add, privileged not carried",
        "named volumes pgdata not carried",
        "secrets api_key not carried",
        "networks not carried",
    ] {
        assert!(
            g.to_decide.iter().any(|l| l.starts_with(start)),
            "no `{start}` in {:#?}",
            g.to_decide
        );
        assert!(
            g.toml.contains(&format!("# TODO: {start}")),
            "no TODO `{start}` at the top:\n{}",
            g.toml
        );
    }
    assert!(g
        .to_decide
        .iter()
        .any(|l| l.contains("psql \\\"$DATABASE_URL\\\"")));
}

#[test]
fn a_curl_healthcheck_becomes_health() {
    let g = generate_with(
        r#"
services:
  api:
    build: .
    command: serve
    healthcheck:
      test: ["CMD", "curl", "-fsS", "http://localhost:8000/healthz"]
      interval: 5s
  web:
    build: .
    command: web
    ports: ["3000:3000"]
    healthcheck: { test: "wget -qO- http://127.0.0.1:3000/ || exit 1" }
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "api", "health"]),
        "http://localhost:${self.port}/healthz"
    );
    assert_eq!(svc(&t, "api")["url"].as_bool(), Some(true));
    assert_eq!(
        string(&t, &["services", "web", "health"]),
        "http://localhost:${self.port}/"
    );
}

#[test]
fn restart_always_and_merge_keys_are_carried() {
    let g = generate_with(
        r#"
x-app: &app
  build: .
  restart: unless-stopped
  environment: { LOG_LEVEL: debug }
services:
  api:
    <<: *app
    command: serve
  once: { build: ., command: migrate, restart: "no" }
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(string(&t, &["services", "api", "restart"]), "always");
    assert_eq!(
        string(&t, &["services", "api", "env", "LOG_LEVEL"]),
        "debug"
    );
    assert!(!svc(&t, "once").contains_key("restart"));
}

#[test]
fn compose_stop_signal_and_stop_grace_period_are_carried_over_as_binky_keys() {
    let g = generate_with(
        r#"
services:
  worker:
    build: .
    command: celery -A app worker
    stop_signal: QUIT
    stop_grace_period: 1m30s
  beat:
    build: .
    command: celery -A app beat
    stop_signal: SIGINT
    stop_grace_period: 500ms
  api:
    build: .
    command: serve
    stop_grace_period: "${API_GRACE:-3s}"
  cache:
    image: redis:7
    stop_signal: SIGKILL
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "worker", "stop_signal"]),
        "SIGQUIT"
    );
    assert_eq!(
        string(&t, &["services", "worker", "stop_grace_period"]),
        "90s"
    );
    assert_eq!(string(&t, &["services", "beat", "stop_signal"]), "SIGINT");
    assert_eq!(
        string(&t, &["services", "beat", "stop_grace_period"]),
        "500ms"
    );
    assert_eq!(string(&t, &["services", "api", "stop_grace_period"]), "3s");
    assert!(!svc(&t, "api").contains_key("stop_signal"));
    // binky runs the adapter's server itself: nothing to carry.
    assert!(!svc(&t, "cache").contains_key("stop_signal"));
    // binky's own reading of the file has them.
    let spec = crate::config::parse(&g.toml, Path::new("binky.toml"))
        .unwrap()
        .spec;
    let worker = spec.services["worker"].process().unwrap();
    assert_eq!(worker.stop.signal(), "SIGQUIT");
    assert_eq!(worker.stop.grace_ms, Some(90_000));
    // What was mapped is said, and nothing is reported as left out.
    let mapped = g.mapped.join("\n");
    assert!(mapped.contains("stop_signal SIGQUIT"), "{mapped}");
    assert!(mapped.contains("stop_grace_period 90s"), "{mapped}");
    let todo = g.to_decide.join("\n");
    assert!(!todo.contains("stop_"), "{todo}");
}

#[test]
fn a_compose_stop_signal_binky_cannot_read_is_left_out_with_a_todo() {
    let g = generate_with(
        "services:\n  worker:\n    build: .\n    command: run\n    stop_signal: SIGWHAT\n    stop_grace_period: soon\n",
        None,
    );
    let t = valid(&g);
    assert!(!svc(&t, "worker").contains_key("stop_signal"));
    assert!(!svc(&t, "worker").contains_key("stop_grace_period"));
    let todo = g.to_decide.join("\n");
    assert!(
        todo.contains("worker: stop_signal `SIGWHAT` not carried over"),
        "{todo}"
    );
    assert!(
        todo.contains("worker: stop_grace_period `soon` not carried over"),
        "{todo}"
    );
}

#[test]
fn compose_durations_become_binky_durations() {
    assert_eq!(compose_duration("10s").as_deref(), Some("10s"));
    assert_eq!(compose_duration("1m30s").as_deref(), Some("90s"));
    assert_eq!(compose_duration("1h").as_deref(), Some("3600s"));
    assert_eq!(compose_duration("1.5s").as_deref(), Some("1500ms"));
    assert_eq!(compose_duration("250ms").as_deref(), Some("250ms"));
    assert_eq!(compose_duration("7").as_deref(), Some("7s"));
    assert_eq!(compose_duration("0s").as_deref(), Some("0s"));
    assert_eq!(compose_duration("soon"), None);
    assert_eq!(compose_duration("10x"), None);
    assert_eq!(compose_duration(""), None);
}

#[test]
fn service_names_binky_cannot_use_are_renamed() {
    let g = generate_with(
        r#"
services:
  my.db: { image: postgres }
  self: { build: ., command: run, depends_on: [my.db], ports: ["8000"] }
  web_ui: { build: ., command: ui, ports: ["3000"], environment: { API: "http://self:8000" } }
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(string(&t, &["services", "my_db", "adapter"]), "postgres");
    assert_eq!(svc(&t, "self_svc")["depends_on"][0].as_str(), Some("my_db"));
    // `web_ui` is no hostname label: the URL gets one.
    assert_eq!(string(&t, &["services", "web_ui", "url"]), "web-ui");
    assert_eq!(
        string(&t, &["services", "web_ui", "env", "API"]),
        "${self_svc.url}"
    );
    assert!(g
        .mapped
        .iter()
        .any(|l| l.starts_with("my_db (renamed from my.db)")));
}

#[test]
fn a_dotenv_the_service_loads_has_its_compose_addresses_overridden() {
    let g = generate_with(
        "services:\n  db: { image: postgres }\n  api: { build: ., command: run, env_file: .env }\n",
        Some("DATABASE_URL=postgres://app:dotenv-Pw-99@db:5432/app\nDEBUG=1\n"),
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "api", "env", "DATABASE_URL"]),
        "${db.url}"
    );
    assert!(!svc(&t, "api")["env"]
        .as_table()
        .unwrap()
        .contains_key("DEBUG"));
    assert_eq!(svc(&t, "api")["env_file"][0].as_str(), Some(".env"));
    absent(&g, "dotenv-Pw-99");
}

#[test]
fn project_name_is_the_directory_name_sanitised() {
    assert_eq!(project_name("shop"), "shop");
    assert_eq!(project_name("My Shop_v2.0"), "my-shop-v2-0");
    assert_eq!(project_name("--ünïcode--"), "n-code");
    assert_eq!(project_name("..."), "app");
    assert_eq!(project_name(&"x".repeat(80)).len(), 63);
    let mut repo = repo_with("services:\n  a: { build: ., command: a }\n", None);
    repo.dir_name = "Big App!".into();
    let g = generate(&repo).unwrap();
    assert_eq!(string(&valid(&g), &["project", "name"]), "big-app");
}

#[test]
fn a_file_that_is_not_compose_is_refused_with_its_name() {
    for (text, says) in [
        ("services: [unclosed", "is not valid YAML"),
        ("", "it is empty"),
        ("- a\n- b\n", "its top level is not a mapping"),
        ("version: '3'\n", "it has no `services:`"),
        ("services: {}\n", "has no service"),
        ("services: [a, b]\n", "is not a mapping"),
    ] {
        let e = generate(&repo_with(text, None)).unwrap_err().to_string();
        assert!(e.starts_with("docker-compose.yml "), "{e}");
        assert!(e.contains(says), "{e}");
        assert!(e.contains("fix:"), "{e}");
    }
}

#[test]
fn urls_are_found_with_their_parts() {
    let hits = scan_urls("a postgres://u:${env.P}@db:5432/app?x=1, http://[::1]:80/ b");
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].host, "db");
    assert_eq!(hits[0].port, Some(5432));
    assert_eq!(hits[0].rest, "/app?x=1");
    assert_eq!(hits[1].host, "::1");
    assert!(url_password("postgres://u:${env.P}@db/app").is_none());
    assert!(url_password("redis://:pw12@cache").is_some());
    assert_eq!(rebase(".env", Some("a/b")), "../../.env");
    assert_eq!(rebase("./a/b/.env", Some("a/b")), ".env");
    assert_eq!(rebase("a/x.env", Some("a/b")), "../x.env");
}

#[test]
fn keys_and_values_written_through_toml_edit_read_back_as_they_were() {
    for s in [
        "plain",
        "psql \"$DATABASE_URL\" -f schema.sql",
        "it's a 'quote' and a \"double\"",
        "back\\slash and\nnew line\tand \u{7} bell",
        "",
    ] {
        let line = format!(
            "{} = {}\nlist = {}\n",
            toml_key(s),
            q(s),
            toml_list(&[s.to_owned(), "x".into()])
        );
        let t: toml::Table = toml::from_str(&line).unwrap_or_else(|e| panic!("{e}\n{line}"));
        assert_eq!(t[s].as_str(), Some(s), "{line}");
        assert_eq!(t["list"][0].as_str(), Some(s), "{line}");
    }
    assert_eq!(toml_key("web-ui_2"), "web-ui_2");
}

#[test]
fn env_files_are_found_through_merge_keys_and_listed_once() {
    let compose = r#"
x-base: &base
  env_file: [./.envs/.local/.django]
services:
  django:
    <<: *base
    env_file: [./.envs/.local/.django, ./.envs/.local/.postgres]
  worker:
    <<: *base
  web:
    env_file:
      - path: .env.web
        required: false
"#;
    assert_eq!(
        env_file_paths(compose),
        vec![
            "./.envs/.local/.django",
            "./.envs/.local/.postgres",
            ".env.web"
        ]
    );
}

#[test]
fn a_credentials_placeholder_default_is_kept_and_check_accepts_it() {
    let g = generate_with(
        "services:\n  api:\n    build: .\n    command: run\n    environment:\n      API_KEY: ${API_KEY:-devkey}\n      SECRET_KEY: ${SECRET_KEY:-Xk9-Real-Looking-2024}\n      TOKEN: ${TOKEN:-}\n",
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "api", "env", "API_KEY"]),
        "${env.API_KEY:-devkey}"
    );
    assert_eq!(
        string(&t, &["services", "api", "env", "SECRET_KEY"]),
        "${env.SECRET_KEY}"
    );
    assert_eq!(
        string(&t, &["services", "api", "env", "TOKEN"]),
        "${env.TOKEN:-}"
    );
    absent(&g, "Xk9-Real-Looking-2024");
    // Only SECRET_KEY must be set: the others have defaults.
    assert!(
        g.toml.contains("# Set before `binky up`: SECRET_KEY\n"),
        "{}",
        g.toml
    );
    // `binky check` finds no inline credential in what init keeps.
    let loaded = crate::config::parse(&g.toml, Path::new("binky.toml")).unwrap();
    let findings = crate::check::check_loaded(&g.toml, &loaded);
    assert!(
        !findings.iter().any(|f| f.code == "inline-credential"),
        "{findings:?}"
    );
}

#[test]
fn test_runners_and_missing_mail_catchers_are_commented_out_and_smtp_follows_the_catcher() {
    let compose = "services:\n  api:\n    build: .\n    command: serve --port 8000\n    ports: ['8000:8000']\n    environment:\n      SMTP_HOST: mail\n      SMTP_PORT: '1025'\n  mail:\n    image: axllent/mailpit\n    ports: ['8025:8025']\n  e2e:\n    image: mcr.microsoft.com/playwright:v1.49.0\n    command: npx playwright test\n    depends_on: [api]\n";
    let g = generate_with(compose, None);
    let t = valid(&g);
    assert!(t["services"].get("e2e").is_none() && t["services"].get("mail").is_none());
    assert!(
        g.toml
            .contains("# [services.e2e]\n# cmd = \"npx playwright test\""),
        "{}",
        g.toml
    );
    assert!(g.toml.contains("brew install mailpit"), "{}", g.toml);
    assert_eq!(
        string(&t, &["services", "api", "env", "SMTP_HOST"]),
        "localhost"
    );
    assert_eq!(string(&t, &["services", "api", "env", "SMTP_PORT"]), "1025");
    assert!(
        g.toml
            .contains("once mail is uncommented: SMTP_PORT = \"${mail.smtp}\""),
        "{}",
        g.toml
    );
    // Installed: the catcher runs, with its UI's url, and SMTP_PORT is its port.
    let mut repo = repo_with(compose, None);
    repo.installed.insert("mailpit".into());
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "mail", "cmd"]),
        "mailpit --smtp 127.0.0.1:${self.smtp} --listen 127.0.0.1:${self.port}"
    );
    assert_eq!(string(&t, &["services", "mail", "url", "http"]), "mail");
    assert_eq!(
        string(&t, &["services", "api", "env", "SMTP_PORT"]),
        "${mail.smtp}"
    );
}

#[test]
fn a_vite_package_gets_its_dev_server_and_no_files_at_all_is_an_error_naming_what_was_looked_for() {
    let mut repo = repo_with(
        "services:\n  api: { build: ./api, command: 'serve --port 8000', ports: ['8000:8000'] }\n",
        None,
    );
    repo.files.insert(
        "web/package.json".into(),
        r#"{"scripts": {"dev": "vite"}}"#.into(),
    );
    repo.files
        .insert("web/vite.config.ts".into(), "export default {}".into());
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "npm run dev -- --port ${self.port} --strictPort --host 127.0.0.1"
    );
    assert_eq!(string(&t, &["services", "web", "workdir"]), "web");
    assert!(
        g.toml
            .contains("# NOTE: Vite (web/vite.config.ts) refuses unknown hosts"),
        "{}",
        g.toml
    );
    let bare = Repo {
        dir_name: "empty".into(),
        ..Repo::default()
    };
    let e = generate(&bare).unwrap_err().to_string();
    assert!(
        e.contains("a Procfile") && e.contains("manage.py") && e.contains("fix:"),
        "{e}"
    );
}

/// A Django project whose settings read the database from parts (`DB_HOST`, …) and never
/// `DATABASE_URL`: its `migrate` is written live, with the parts as the database service's
/// tokens, which a golden build resolves to its template's.
#[test]
fn settings_by_parts_migrate_with_the_database_services_own_tokens() {
    let compose = r#"
services:
  web:
    build: .
    command: python manage.py runserver 0.0.0.0:8000
    ports: ["8000:8000"]
    depends_on: [db, redis]
    environment:
      DB_HOST: db
      DB_PORT: "5432"
      DB_USER: app
      DB_PASSWORD: app-secret
      DB_NAME: app
      REDIS_URL: redis://redis:6379/0
  db:
    image: postgres:16
    environment:
      POSTGRES_USER: app
      POSTGRES_PASSWORD: app-secret
      POSTGRES_DB: app
  redis:
    image: redis:7
"#;
    let mut repo = repo_with(compose, None);
    repo.files.insert(
        "manage.py".into(),
        "import os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'app.settings')\n".into(),
    );
    repo.files.insert(
        "app/settings.py".into(),
        "import os\nDATABASES = {'default': {'HOST': os.environ['DB_HOST'], 'PORT': os.environ['DB_PORT']}}\n".into(),
    );
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    let db = svc(&t, "db");
    assert_eq!(
        db["migrate"].as_str(),
        Some("python manage.py migrate --noinput"),
        "{}",
        g.toml
    );
    assert_eq!(db["clone_from"].as_str(), Some("golden"));
    let env = db["env"].as_table().unwrap();
    assert_eq!(env["DB_HOST"].as_str(), Some("${db.host}"), "{}", g.toml);
    assert_eq!(env["DB_PORT"].as_str(), Some("${db.port}"), "{}", g.toml);
    assert_eq!(
        env["REDIS_URL"].as_str(),
        Some("${redis.url}"),
        "{}",
        g.toml
    );
    assert!(!g.toml.contains("# migrate ="), "{}", g.toml);
    // And `binky check` finds every token resolvable.
    let findings = crate::check::check(&g.toml, Path::new("binky.toml"));
    assert!(
        !findings.iter().any(|f| f.code == "unresolved-token"),
        "{findings:?}"
    );
}

/// A project with no compose file: only `files`.
fn bare_repo(files: &[(&str, &str)]) -> Repo {
    Repo {
        dir_name: "shop".into(),
        files: files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect(),
        ..Repo::default()
    }
}

/// No finding of `binky check` is an error.
fn check_passes(g: &Generated) {
    let findings = crate::check::check(&g.toml, Path::new("binky.toml"));
    assert!(
        !crate::check::has_errors(&findings),
        "{findings:#?}\n{}",
        g.toml
    );
}

/// A Node app with only package.json: its `dev` script serves on $PORT (binky's port), its
/// `worker` script is a service beside it, both get the databases their dependencies name.
#[test]
fn a_node_apps_package_json_alone_gives_its_web_and_worker_with_the_databases_it_uses() {
    let repo = bare_repo(&[(
        "package.json",
        r#"{
  "name": "orders",
  "scripts": { "dev": "node --watch server.js", "worker": "node worker.js", "test": "node --test" },
  "dependencies": { "pg": "^8.11.0", "redis": "^4.6.0", "express": "^4.19.0" }
}"#,
    )]);
    let g = generate(&repo).unwrap_or_else(|e| panic!("{e}"));
    let t = valid(&g);
    check_passes(&g);
    assert_eq!(string(&t, &["services", "db", "adapter"]), "postgres");
    assert_eq!(string(&t, &["services", "redis", "adapter"]), "redis");
    let web = svc(&t, "web");
    assert_eq!(web["cmd"].as_str(), Some("npm run dev"), "{}", g.toml);
    assert_eq!(web["url"].as_bool(), Some(true), "{}", g.toml);
    assert_eq!(
        string(&t, &["services", "web", "env", "PORT"]),
        "${self.port}"
    );
    let worker = svc(&t, "worker");
    assert_eq!(worker["cmd"].as_str(), Some("npm run worker"), "{}", g.toml);
    assert!(worker.get("url").is_none(), "{}", g.toml);
    for s in ["web", "worker"] {
        let deps: Vec<&str> = svc(&t, s)["depends_on"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(deps, ["db", "redis"], "{s}: {}", g.toml);
    }
    // Both set the same addresses: written once, where both read them.
    assert_eq!(
        string(&t, &["defaults", "env", "DATABASE_URL"]),
        "${db.url}",
        "{}",
        g.toml
    );
    assert_eq!(
        string(&t, &["defaults", "env", "REDIS_URL"]),
        "${redis.url}"
    );
    assert!(!g.toml.contains("TODO: the command"), "{}", g.toml);
    // A package without `pg`/`redis` gets no database.
    let plain = bare_repo(&[("package.json", r#"{"scripts": {"start": "node index.js"}}"#)]);
    let g = generate(&plain).unwrap();
    let t = valid(&g);
    assert_eq!(string(&t, &["services", "web", "cmd"]), "npm run start");
    assert!(t["services"].get("db").is_none(), "{}", g.toml);
    assert!(t.get("defaults").is_none(), "{}", g.toml);
}

/// alembic.ini and requirements.txt beside a FastAPI app: uvicorn serves the app on the
/// world's port, and the database's migrate is Alembic's, live.
#[test]
fn alembic_and_an_asgi_app_without_compose_give_a_live_migrate_and_the_apps_process() {
    let repo = bare_repo(&[
        (
            "requirements.txt",
            "fastapi==0.115.0\nuvicorn[standard]==0.30.0\nSQLAlchemy==2.0.30\nalembic==1.13.0\npsycopg2-binary==2.9.9\n",
        ),
        ("alembic.ini", "[alembic]\nscript_location = migrations\n"),
        (
            "app/main.py",
            "import os\nfrom fastapi import FastAPI\n\napi = FastAPI(title=\"items\")\n\n@api.get(\"/\")\ndef index():\n    return {}\n",
        ),
    ]);
    let g = generate(&repo).unwrap_or_else(|e| panic!("{e}"));
    let t = valid(&g);
    check_passes(&g);
    let db = svc(&t, "db");
    assert_eq!(db["adapter"].as_str(), Some("postgres"));
    assert_eq!(
        db["migrate"].as_str(),
        Some("alembic upgrade head"),
        "{}",
        g.toml
    );
    assert!(!g.toml.contains("# migrate = \"alembic"), "{}", g.toml);
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "uvicorn app.main:api --host 127.0.0.1 --port ${self.port}"
    );
    assert_eq!(svc(&t, "web")["url"].as_bool(), Some(true));
    assert_eq!(
        string(&t, &["services", "web", "env", "DATABASE_URL"]),
        "${db.url}"
    );
    // One process: nothing is shared, so no [defaults].
    assert!(t.get("defaults").is_none(), "{}", g.toml);
    // In a directory of its own, it runs there.
    let repo = bare_repo(&[
        (
            "backend/requirements.txt",
            "fastapi\nuvicorn\nasyncpg\nalembic\n",
        ),
        ("backend/alembic.ini", "[alembic]\n"),
        (
            "backend/main.py",
            "from fastapi import FastAPI\napp = FastAPI()\n",
        ),
    ]);
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "uvicorn main:app --host 127.0.0.1 --port ${self.port}"
    );
    assert_eq!(string(&t, &["services", "web", "workdir"]), "backend");
    assert_eq!(
        string(&t, &["services", "db", "migrate"]),
        "alembic upgrade head"
    );
    // The app a package down from alembic.ini's directory: its module path from there.
    let repo = bare_repo(&[
        (
            "backend/requirements.txt",
            "fastapi
uvicorn
psycopg
alembic
",
        ),
        (
            "backend/alembic.ini",
            "[alembic]
",
        ),
        (
            "backend/app/main.py",
            "from fastapi import FastAPI
app = FastAPI()
",
        ),
    ]);
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        "uvicorn app.main:app --host 127.0.0.1 --port ${self.port}"
    );
    assert_eq!(string(&t, &["services", "web", "workdir"]), "backend");
    assert_eq!(
        string(&t, &["services", "db", "migrate"]),
        "alembic upgrade head"
    );
}

/// What every process service of the file sets alike is written once under
/// `[defaults.env]`; what one sets differently (or its own `${self.…}`) stays its own.
#[test]
fn env_every_process_shares_is_written_once_under_defaults() {
    let compose = r#"
services:
  web:
    build: .
    command: python manage.py runserver 0.0.0.0:8000
    ports: ["8000:8000"]
    environment:
      DATABASE_URL: postgres://app@db:5432/app
      REDIS_URL: redis://redis:6379/0
      DJANGO_DEBUG: "1"
      ROLE: web
      PORT: "8000"
  worker:
    build: .
    command: rq worker
    environment:
      DATABASE_URL: postgres://app@db:5432/app
      REDIS_URL: redis://redis:6379/0
      DJANGO_DEBUG: "1"
      ROLE: worker
  db:
    image: postgres:16
  redis:
    image: redis:7
"#;
    let mut repo = repo_with(compose, None);
    repo.files.insert(
        "manage.py".into(),
        "import os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'app.settings')\n".into(),
    );
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    check_passes(&g);
    let defaults = t["defaults"]["env"].as_table().unwrap();
    let keys: Vec<&str> = defaults.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["DATABASE_URL", "DJANGO_DEBUG", "REDIS_URL"],
        "{}",
        g.toml
    );
    assert_eq!(defaults["DATABASE_URL"].as_str(), Some("${db.url}"));
    assert_eq!(defaults["DJANGO_DEBUG"].as_str(), Some("1"));
    assert!(
        g.mapped.iter().any(|m| m
            == "[defaults.env]: DATABASE_URL, DJANGO_DEBUG, REDIS_URL (every process service sets them alike)"),
        "{:?}",
        g.mapped
    );
    assert_eq!(string(&t, &["services", "web", "env", "ROLE"]), "web");
    assert_eq!(string(&t, &["services", "worker", "env", "ROLE"]), "worker");
    assert_eq!(
        string(&t, &["services", "web", "env", "PORT"]),
        "${self.port}"
    );
    for s in ["web", "worker"] {
        let env = svc(&t, s)["env"].as_table().unwrap();
        assert!(!env.contains_key("DATABASE_URL"), "{s}: {}", g.toml);
    }
    // And what the services get is what they had: binky's own merge of the file.
    let loaded = crate::config::parse(&g.toml, Path::new("binky.toml")).unwrap();
    for s in ["web", "worker"] {
        let env = &loaded.spec.services[s].process().unwrap().env;
        assert_eq!(env["REDIS_URL"], "${redis.url}", "{s}");
        assert_eq!(env["DJANGO_DEBUG"], "1", "{s}");
    }
    // The database's migrate gets [defaults.env] too: its own env repeats none of it, only
    // what web (whose code it runs) sets of its own.
    let db = svc(&t, "db");
    assert_eq!(
        db["migrate"].as_str(),
        Some("python manage.py migrate --noinput")
    );
    let db_env: Vec<&str> = db["env"]
        .as_table()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(db_env, ["ROLE"], "{}", g.toml);
    let migrate_env = &loaded.spec.services["db"].resource().unwrap().env;
    assert_eq!(migrate_env["DATABASE_URL"], "${db.url}");
    assert_eq!(migrate_env["ROLE"], "web");
    // A single process keeps its env as it is.
    let one = generate_with(
        "services:\n  web:\n    build: .\n    command: serve\n    environment:\n      A: \"1\"\n",
        None,
    );
    let t = valid(&one);
    assert!(t.get("defaults").is_none(), "{}", one.toml);
    assert_eq!(string(&t, &["services", "web", "env", "A"]), "1");
}

/// A Celery or RQ worker binky knows by its command gets the signal it stops on at once,
/// from compose (where compose gives none) and from a Procfile; a signal compose gives is
/// kept, and what is not a worker gets none. `binky check` has nothing left to suggest.
#[test]
fn a_known_worker_gets_the_stop_signal_it_stops_on_at_once() {
    let g = generate_with(
        r#"
services:
  worker:
    build: .
    command: celery -A app worker -l info
  quick:
    build: .
    command: celery -A app worker
    stop_signal: SIGINT
  beat:
    build: .
    command: celery -A app beat
  jobs:
    build: .
    command: python manage.py rqworker default
"#,
        None,
    );
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "worker", "stop_signal"]),
        "SIGQUIT"
    );
    assert_eq!(string(&t, &["services", "quick", "stop_signal"]), "SIGINT");
    assert_eq!(string(&t, &["services", "jobs", "stop_signal"]), "SIGKILL");
    assert!(!svc(&t, "beat").contains_key("stop_signal"), "{}", g.toml);
    assert!(
        g.toml
            .contains("stop_signal = \"SIGQUIT\"  # a Celery worker: "),
        "{}",
        g.toml
    );
    let findings = crate::check::check(&g.toml, Path::new("binky.toml"));
    assert!(
        !findings.iter().any(|f| f.code == "slow-stop"),
        "{findings:?}"
    );

    let repo = bare_repo(&[
        (
            "Procfile",
            "web: gunicorn app:app --bind 0.0.0.0:$PORT\nworker: rq worker --url $REDIS_URL\n",
        ),
        ("requirements.txt", "gunicorn\nrq\n"),
    ]);
    let g = generate(&repo).unwrap_or_else(|e| panic!("{e}"));
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "worker", "stop_signal"]),
        "SIGKILL"
    );
    assert!(!svc(&t, "web").contains_key("stop_signal"), "{}", g.toml);
}

/// A Django app with two databases: one golden template, for the one its DATABASE_URL
/// names; two, each built with settings naming both, would wait for each other for ever
/// (`binky up` refuses such a file). The other is left to the person, saying why.
#[test]
fn two_databases_of_one_migrating_app_get_one_golden_template_and_a_todo_for_the_other() {
    let compose = r#"
services:
  analytics:
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: pw
  db:
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: pw
  web:
    build: .
    command: python manage.py runserver 0.0.0.0:8000
    ports: ["8000:8000"]
    depends_on: [analytics, db]
    environment:
      ANALYTICS_URL: postgres://postgres:pw@analytics:5432/postgres
      DATABASE_URL: postgres://postgres:pw@db:5432/postgres
"#;
    let mut repo = repo_with(compose, None);
    repo.files.insert("manage.py".into(), "import os\n".into());
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    assert_eq!(
        svc(&t, "db")["clone_from"].as_str(),
        Some("golden"),
        "{}",
        g.toml
    );
    assert!(svc(&t, "analytics").get("migrate").is_none(), "{}", g.toml);
    assert!(
        svc(&t, "analytics").get("clone_from").is_none(),
        "{}",
        g.toml
    );
    assert!(
        g.toml
            .contains("# TODO: analytics: no migrate: web's code migrates db"),
        "{}",
        g.toml
    );
}

/// The FastAPI monorepo shape: compose at the top, one Dockerfile under backend/ that
/// builds the frontend in a stage and runs the API from /app/backend/, settings
/// interpolated from `.env`, a prestart script that migrates and seeds.
fn fastapi_monorepo(tracked: bool, venv: bool) -> Repo {
    let compose = "services:\n  db:\n    image: postgres:17\n    environment:\n      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?Variable not set}\n  prestart:\n    build: { context: ., dockerfile: backend/Dockerfile }\n    depends_on: [db]\n    command: bash scripts/prestart.sh\n  backend:\n    build: { context: ., dockerfile: backend/Dockerfile }\n    depends_on: [db, prestart]\n    ports: [\"8000:8000\"]\n    environment:\n      SECRET_KEY: ${SECRET_KEY:?Variable not set}\n      FIRST_SUPERUSER_PASSWORD: ${FIRST_SUPERUSER_PASSWORD:?Variable not set}\n      GITHUB_TOKEN: ${GITHUB_TOKEN}\n      FRONTEND_HOST: ${FRONTEND_HOST:-http://localhost:5173}\n      DATABASE_URL: postgresql://postgres:${POSTGRES_PASSWORD}@db:5432/app\n";
    let dockerfile = "FROM node:22 AS frontend-build\nWORKDIR /app/frontend\nCOPY ./frontend /app/frontend\nARG VITE_API_URL=\nRUN npm run build\nFROM python:3.12\nWORKDIR /app/\nCOPY ./backend/scripts /app/backend/scripts\nCOPY ./backend/alembic.ini /app/backend/\nCOPY ./backend/app /app/backend/app\nWORKDIR /app/backend/\nCMD [\"fastapi\", \"run\", \"--workers\", \"4\"]\n";
    let mut repo = repo_with(
        compose,
        Some("SECRET_KEY=changethis\nFIRST_SUPERUSER_PASSWORD=changethis\nPOSTGRES_PASSWORD=changethis\nGITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"),
    );
    repo.dotenv_tracked = tracked;
    repo.files = super::read::files(&[
        ("backend/Dockerfile", dockerfile),
        ("backend/alembic.ini", "[alembic]\n"),
        (
            "backend/scripts/prestart.sh",
            "set -e\npython app/backend_pre_start.py\nalembic upgrade head\npython app/initial_data.py\n",
        ),
        ("backend/app/initial_data.py", ""),
        (
            "frontend/package.json",
            r#"{"scripts":{"dev":"vite","build":"vite build"},"devDependencies":{"vite":"^6"}}"#,
        ),
    ]);
    if venv {
        repo.venvs.insert(
            "backend/.venv".into(),
            ["python", "fastapi", "alembic"]
                .iter()
                .map(|p| p.to_string())
                .collect(),
        );
    }
    repo
}

#[test]
fn a_credential_the_tracked_dotenv_sets_is_its_default_and_an_untracked_ones_stays_a_reference() {
    let g = generate(&fastapi_monorepo(true, false)).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "backend", "env", "SECRET_KEY"]),
        "${env.SECRET_KEY:-changethis}"
    );
    assert_eq!(
        string(
            &t,
            &["services", "backend", "env", "FIRST_SUPERUSER_PASSWORD"]
        ),
        "${env.FIRST_SUPERUSER_PASSWORD:-changethis}"
    );
    // Nothing `binky up` refuses for want of it: only the token stays required.
    assert!(
        !g.toml.contains("Set before `binky up`: SECRET_KEY"),
        "{}",
        g.toml
    );
    // A real token's shape is not copied, tracked or not: the repository may have
    // committed it by mistake.
    absent(&g, "ghp_abcdefghijklmnopqrstuvwxyz0123456789");
    assert_eq!(
        string(&t, &["services", "backend", "env", "GITHUB_TOKEN"]),
        "${env.GITHUB_TOKEN}"
    );
    assert!(
        g.toml.contains("# Set before `binky up`: GITHUB_TOKEN\n"),
        "{}",
        g.toml
    );

    // Not tracked: a machine's own .env, whose values are never copied.
    let g = generate(&fastapi_monorepo(false, false)).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "backend", "env", "SECRET_KEY"]),
        "${env.SECRET_KEY}"
    );
    absent(&g, "changethis");
}

#[test]
fn a_python_part_runs_from_its_dockerfiles_workdir_through_its_own_venv_which_each_world_copies() {
    let g = generate(&fastapi_monorepo(true, true)).unwrap();
    let t = valid(&g);
    let backend = svc(&t, "backend");
    assert_eq!(string(&t, &["services", "backend", "workdir"]), "backend");
    assert_eq!(
        backend["cmd"].as_str(),
        Some(".venv/bin/fastapi run --workers 4 --port ${self.port}"),
        "{}",
        g.toml
    );
    assert_eq!(
        t["project"]["copy"].as_array().map(Vec::as_slice),
        Some(&[toml::Value::from("backend/.venv")][..]),
        "{}",
        g.toml
    );
    // alembic.ini beside the code: migrated and seeded once, in a golden template.
    let db = svc(&t, "db");
    assert_eq!(
        db["migrate"].as_str(),
        Some(".venv/bin/alembic upgrade head")
    );
    assert_eq!(
        db["seed"].as_str(),
        Some(".venv/bin/python app/initial_data.py")
    );
    assert_eq!(db["clone_from"].as_str(), Some("golden"));
    assert_eq!(db["workdir"].as_str(), Some("backend"));
    // The frontend only a Dockerfile stage builds: its own dev server, and the backend's
    // browser-facing origin is that server's proxy URL.
    assert_eq!(
        string(&t, &["services", "frontend", "cmd"]),
        "npm run dev -- --port ${self.port} --strictPort --host 127.0.0.1"
    );
    assert_eq!(
        string(&t, &["services", "backend", "env", "FRONTEND_HOST"]),
        "${frontend.proxy_url}"
    );
    // What the stage that builds it passes the bundle is the dev server's env.
    assert_eq!(
        string(&t, &["services", "frontend", "env", "VITE_API_URL"]),
        "${backend.proxy_url}"
    );

    // Without a venv: the commands as the Dockerfile has them, nothing to copy.
    let g = generate(&fastapi_monorepo(true, false)).unwrap();
    let t = valid(&g);
    assert_eq!(
        string(&t, &["services", "backend", "cmd"]),
        "fastapi run --workers 4 --port ${self.port}"
    );
    assert!(!t["project"].as_table().unwrap().contains_key("copy"));
}

#[test]
fn the_header_names_only_the_todo_commands_check_and_up_name() {
    // A test runner compose only builds: commented out, its placeholder with it; the
    // worker compose only builds: a live TODO that `binky check` refuses.
    let compose = "services:\n  api:\n    build: .\n    command: serve\n  playwright:\n    build: { context: ./frontend, dockerfile: Dockerfile.playwright }\n  worker:\n    build: ./worker\n";
    let g = generate_with(compose, None);
    assert!(g.toml.contains("# [services.playwright]"), "{}", g.toml);
    assert!(
        g.toml
            .contains("Before `binky up NAME`: write the command of worker\n"),
        "{}",
        g.toml
    );
    let loaded = crate::config::parse(&g.toml, Path::new("binky.toml")).unwrap();
    let todos: Vec<&str> = loaded
        .spec
        .services
        .iter()
        .filter(|(_, s)| {
            s.process()
                .is_some_and(|p| p.cmd.trim_start().starts_with("TODO"))
        })
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(todos, ["worker"]);
    // Without the worker, nothing is left to write: the header says so.
    let g = generate_with(
        "services:\n  api:\n    build: .\n    command: serve\n  playwright:\n    build: { context: ./frontend, dockerfile: Dockerfile.playwright }\n",
        None,
    );
    assert!(g.toml.contains("# [services.playwright]"), "{}", g.toml);
    assert!(!g.toml.contains("write the command of"), "{}", g.toml);
}

#[test]
fn a_command_that_names_its_port_listens_on_binkys_instead() {
    let compose = "services:\n  flower:\n    build: .\n    command: celery -A app flower --port=5555\n  api:\n    build: .\n    command: uvicorn app.main:app --host 0.0.0.0 --port 8000\n  web:\n    build: .\n    command: npx serve -p 3000\n  admin:\n    build: .\n    command: gunicorn app.wsgi --bind 0.0.0.0:9000\n  worker:\n    build: .\n    command: celery -A app worker -l info\n";
    let g = generate_with(compose, None);
    let t = valid(&g);
    for (name, cmd) in [
        ("flower", "celery -A app flower --port=${self.port}"),
        (
            "api",
            "uvicorn app.main:app --host 0.0.0.0 --port ${self.port}",
        ),
        ("web", "npx serve -p ${self.port}"),
        ("admin", "gunicorn app.wsgi --bind 0.0.0.0:${self.port}"),
    ] {
        assert_eq!(string(&t, &["services", name, "cmd"]), cmd, "{}", g.toml);
        assert_eq!(svc(&t, name)["url"].as_bool(), Some(true), "{name}");
    }
    // A worker names no port: it gets none, and the signal it stops on at once.
    assert!(!svc(&t, "worker").contains_key("url"), "{}", g.toml);
    assert_eq!(
        string(&t, &["services", "worker", "stop_signal"]),
        "SIGQUIT"
    );
}

#[test]
fn the_project_is_named_after_the_repository_not_the_folder_init_runs_in() {
    use super::repository_name;
    for remote in [
        "git@github.com:acme/Shop-Front.git",
        "https://github.com/acme/Shop-Front",
        "https://github.com/acme/Shop-Front.git/",
        "/srv/git/Shop-Front.git",
    ] {
        let name = repository_name(Some(remote), Some("/home/me/app"), "app");
        assert_eq!(project_name(&name), "shop-front", "{remote}");
    }
    // No remote: the work tree's top folder, not the subfolder `app`.
    assert_eq!(repository_name(None, Some("/home/me/shop"), "app"), "shop");
    // Not a repository at all: the directory.
    assert_eq!(repository_name(None, None, "app"), "app");
}

#[test]
fn a_django_app_without_compose_runs_manage_py_and_its_workers_through_its_own_venv() {
    let mut repo = bare_repo(&[
        ("manage.py", ""),
        (
            "Procfile",
            "web: python manage.py runserver\nworker: celery -A config worker -l info\nrelease: python manage.py migrate --noinput\n",
        ),
        ("requirements.txt", "Django\npsycopg\ncelery[redis]\n"),
    ]);
    repo.venvs.insert(
        ".venv".into(),
        ["python", "python3", "celery", "django-admin"]
            .iter()
            .map(|p| p.to_string())
            .collect(),
    );
    let g = generate(&repo).unwrap();
    let t = valid(&g);
    check_passes(&g);
    assert_eq!(
        string(&t, &["services", "web", "cmd"]),
        ".venv/bin/python manage.py runserver 127.0.0.1:${self.port}",
        "{}",
        g.toml
    );
    assert_eq!(
        string(&t, &["services", "worker", "cmd"]),
        ".venv/bin/celery -A config worker -l info"
    );
    assert_eq!(
        string(&t, &["services", "worker", "stop_signal"]),
        "SIGQUIT"
    );
    assert_eq!(
        string(&t, &["services", "db", "migrate"]),
        ".venv/bin/python manage.py migrate --noinput"
    );
    assert_eq!(
        t["project"]["copy"].as_array().map(Vec::as_slice),
        Some(&[toml::Value::from(".venv")][..])
    );
}

#[test]
fn a_django_app_without_compose_whose_settings_read_the_database_in_parts_gets_each_part() {
    let g = generate(&bare_repo(&[
        ("manage.py", ""),
        ("requirements.txt", "Django\npsycopg[binary]\nredis\ndjango-rq\n"),
        (
            "shop/configuration.py",
            "DATABASE = {\n    'NAME': os.environ.get('DB_NAME', 'shop'),\n    'USER': os.environ.get('DB_USER', ''),\n    'PASSWORD': os.environ.get('DB_PASSWORD', ''),\n    'HOST': os.environ.get('DB_HOST', 'localhost'),\n    'PORT': os.environ.get('DB_PORT', ''),\n}\nREDIS = {'HOST': os.environ.get('REDIS_HOST', 'localhost'), 'PORT': int(os.environ.get('REDIS_PORT', 6379))}\n",
        ),
    ]))
    .unwrap();
    let t = valid(&g);
    check_passes(&g);
    let env = |k: &str| -> String {
        t.get("defaults")
            .and_then(|d| d.get("env"))
            .and_then(|e| e.get(k))
            .or_else(|| t["services"]["web"].get("env").and_then(|e| e.get(k)))
            .and_then(|v| v.as_str())
            .unwrap_or_else(|| panic!("no {k} in:\n{}", g.toml))
            .to_owned()
    };
    for (k, v) in [
        ("DB_HOST", "${db.host}"),
        ("DB_PORT", "${db.port}"),
        ("DB_USER", "${db.user}"),
        ("DB_PASSWORD", "${db.password}"),
        ("DB_NAME", "${db.database}"),
        ("REDIS_HOST", "${redis.host}"),
        ("REDIS_PORT", "${redis.port}"),
    ] {
        assert_eq!(env(k), v, "{k}\n{}", g.toml);
    }
    // The parts reach migrate too: it is live, not commented out for want of them.
    assert_eq!(
        string(&t, &["services", "db", "migrate"]),
        "python manage.py migrate --noinput",
        "{}",
        g.toml
    );
}

#[test]
fn a_django_app_without_a_procfile_gets_the_workers_its_requirements_name() {
    let g = generate(&bare_repo(&[
        ("manage.py", ""),
        (
            "requirements/base.txt",
            "Django\npsycopg2-binary\ndjango-rq\ncelery[redis]\ndjango_celery_beat\n",
        ),
        (
            "config/celery_app.py",
            "from celery import Celery\napp = Celery(\"shop\")\n",
        ),
    ]))
    .unwrap();
    let t = valid(&g);
    check_passes(&g);
    assert_eq!(
        string(&t, &["services", "rqworker", "cmd"]),
        "python manage.py rqworker default"
    );
    assert_eq!(
        string(&t, &["services", "rqworker", "stop_signal"]),
        "SIGKILL"
    );
    assert_eq!(
        string(&t, &["services", "worker", "cmd"]),
        "celery -A config.celery_app worker -l info"
    );
    assert_eq!(
        string(&t, &["services", "worker", "stop_signal"]),
        "SIGQUIT"
    );
    assert_eq!(
        string(&t, &["services", "beat", "cmd"]),
        "celery -A config.celery_app beat -l info"
    );
    // Celery without an app module to name: a TODO, not a command that fails later.
    let g = generate(&bare_repo(&[
        ("manage.py", ""),
        ("requirements.txt", "Django\ncelery\n"),
    ]))
    .unwrap();
    assert!(
        !g.toml.lines().any(|l| l == "[services.worker]"),
        "{}",
        g.toml
    );
    assert!(
        g.to_decide
            .iter()
            .any(|t| t.starts_with("celery is in the requirements but no Celery app module")),
        "{:?}",
        g.to_decide
    );
}
