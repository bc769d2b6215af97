//! ratekeeper: an admin-managed, multi-tenant rate-limit platform. Policies live in SQL,
//! a sync task pushes them into Redis, and Lua scripts in Redis take each decision.
#![forbid(unsafe_code)]

pub mod acquire;
pub mod api;
pub mod auth;
pub mod cli;
pub mod config;
pub mod console;
pub mod control;
pub mod domain;
pub mod grpc;
pub mod notify;
pub mod policy_file;
pub mod snapshot;
pub mod startup;
pub mod state;
pub mod store;
pub mod sync;
pub mod telemetry;
