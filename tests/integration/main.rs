//! Integration tests: the real `binky` binary, real git repositories in temp dirs, real
//! processes, an isolated `BINKY_HOME` each. Every test cleans up and most assert that
//! nothing is left behind.
//!
//! Unix only: it runs real git, real servers from Debian's packages and reads processes the
//! Unix way. What also runs on Windows is tests/everywhere.
#![cfg(unix)]

mod adapter_names;
mod agents;
mod bootstrap;
mod celery_redis;
mod check;
mod clickhouse_server;
mod client_urls;
// Reads /proc: Linux only (the file says so itself).
mod clean_daemon;
mod compat_012;
mod daemon;
mod dashboard;
mod docs;
mod env_tokens;
mod example;
mod exec_and_remove;
mod external_adapter;
mod faults;
mod gate;
mod golden;
mod golden_frameworks;
mod golden_stages;
mod golden_stuck;
mod harness;
mod health;
mod homes;
mod hosts;
mod init;
mod init_apps;
mod kafka_server;
mod layers;
mod lifecycle;
mod limits;
mod live;
mod mariadb_server;
mod mcp;
mod person;
mod pg_server;
mod platform;
mod proxy;
mod rabbitmq_server;
mod redis_server;
mod reliability;
mod replicas;
mod s3_server;
mod secrets;
mod server_down;
mod shared;
mod shared_files;
mod slices_clickhouse;
mod slices_kafka;
mod slices_mysql;
mod slices_postgres;
mod slices_rabbitmq;
mod slices_redis;
mod slices_s3;
mod stopping;
mod storm;
mod top;
mod world_commands;
