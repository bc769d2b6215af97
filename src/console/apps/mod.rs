//! The application pages: the list of applications, and one application's page with its
//! policies, members and API keys (the forms of the last two re-render that page).

pub mod keys;
pub mod list;
pub mod members;
pub mod page;
pub mod policy_table;
