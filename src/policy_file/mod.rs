//! Policies as a file (YAML or JSON) that people keep in version control: the format
//! (`format`), amounts in units (`units`), reading a file into validated specs (`parse`),
//! writing policies as a file (`render`), the field differences a plan shows (`plan`) and the format's JSON Schema (`schema`).

mod format;
mod parse;
mod plan;
mod render;
mod schema;
mod units;

pub use format::{AppDocument, FileOverride, FilePolicy};
pub use parse::{FileError, FileErrors, PolicyFile, parse, parse_file};
pub use plan::{FieldChange, field_changes};
pub use render::{documents, to_json, to_yaml};
pub use schema::schema;
pub use units::Amount;
