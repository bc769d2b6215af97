//! The web console: server-rendered askama pages over the same `control` operations (and so
//! the same permission rules) as the JSON API, with a small script for the live state.
//! Handlers parse the form, check the session and its CSRF token, call `control`, render.

mod account;
mod apps;
mod assets;
mod audit_log;
mod chart;
mod csv;
mod diff;
mod error;
mod format;
mod forms;
mod html_form;
mod last_hour;
mod load_limit;
mod login;
mod navigation;
mod oidc_login;
mod page;
mod policies;
mod policy_files;
mod recent;
mod respond;
mod routes;
mod session;
mod users;

pub use error::ConsoleError;
pub use navigation::not_found;
pub use routes::routes;
