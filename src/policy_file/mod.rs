//! Policies as a file (YAML or JSON) that people keep in version control: the format
//! (`format`), amounts in units (`units`), reading a file into validated specs (`parse`),
//! writing policies as a file (`render`) and the format's JSON Schema (`schema`).

mod format;
mod parse;
mod render;
mod schema;
mod units;

pub use format::{AppDocument, FileOverride, FilePolicy};
pub use parse::{FileError, FileErrors, parse};
pub use render::{documents, to_json, to_yaml};
pub use schema::schema;
pub use units::Amount;
