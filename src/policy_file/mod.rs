//! Policies as a file (YAML or JSON) that people keep in version control: the format
//! (`format`), what one file may make a reader do (`caps`), reading off the async workers
//! (`off_thread`), amounts in units (`units`), reading a file into validated specs
//! (`parse`, one policy at a time in `checks`, errors located by `lines`),
//! writing policies as a file (`render`), an envoyproxy/ratelimit config made into one (`envoy`), a policy's fields as a plan shows them (`plan`) and the format's JSON Schema (`schema`).

mod caps;
mod checks;
mod envoy;
mod format;
mod lines;
mod off_thread;
mod parse;
mod plan;
mod render;
mod schema;
mod units;

pub use caps::Caps;
pub use envoy::{EnvoyError, EnvoyErrors, from_envoy};
pub use format::{AppDocument, FileDescriptor, FileOverride, FilePolicy};
pub use off_thread::parse_off_thread;
pub use parse::{FileError, FileErrors, PolicyFile, parse, parse_file, parse_file_within};
pub use plan::written_fields;
pub use render::{documents, to_json, to_yaml};
pub use schema::schema;
pub use units::Amount;
