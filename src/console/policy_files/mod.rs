//! Policy files in the console (README "Policy files"): an application's policies
//! downloaded as the file the API exports (`download`), and a file pasted or read into
//! a form, planned, then applied exactly as planned (`apply`; the plan as people read
//! it: `plan_view`).

pub mod apply;
pub mod download;
mod plan_view;
