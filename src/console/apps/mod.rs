//! The application pages: the list of applications, and one application's page with its
//! policies, members, API keys and settings (their forms re-render that page).

pub mod attention;
pub mod keys;
pub mod list;
pub mod members;
pub mod page;
mod page_parts;
pub mod policy_table;
pub mod settings;
pub mod webhooks;
