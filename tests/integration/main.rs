//! Integration tests: the real `binky` binary, real git repositories in temp dirs, real
//! processes, an isolated `BINKY_HOME` each. Every test cleans up and most assert that
//! nothing is left behind.

mod agents;
mod bootstrap;
mod celery_redis;
mod check;
mod clickhouse_server;
mod compat_012;
mod daemon;
mod dashboard;
mod env_tokens;
mod example;
mod exec_and_remove;
mod external_adapter;
mod faults;
mod gate;
mod golden;
mod golden_frameworks;
mod harness;
mod health;
mod init;
mod init_apps;
mod kafka_server;
mod lifecycle;
mod limits;
mod live;
mod mariadb_server;
mod mcp;
mod pg_server;
mod proxy;
mod rabbitmq_server;
mod redis_server;
mod reliability;
mod replicas;
mod s3_server;
mod secrets;
mod shared;
mod slices_clickhouse;
mod slices_kafka;
mod slices_mysql;
mod slices_postgres;
mod slices_rabbitmq;
mod slices_redis;
mod slices_s3;
mod storm;
mod top;
