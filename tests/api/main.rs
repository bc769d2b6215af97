//! Integration tests: the real server on port 0, real PostgreSQL, MariaDB, SQLite and
//! Redis. `scripts/test.sh` makes sure the services run.

mod helpers;

mod accuracy;
mod acquire;
mod acquire_all;
mod admin_api;
mod algorithms;
mod blocked;
mod cli;
mod console;
mod grpc;
mod held_counts;
mod hostile_input;
mod import_envoy;
mod lua;
mod new_keys;
mod operations;
mod outages;
mod scopes;
mod shadow_mode;
mod store;
mod sync;
