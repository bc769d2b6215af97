//! What a caller wants the policies of some applications to be: a desired list, planned
//! against what is stored and applied as a whole (`Control::plan_file`, `apply_file`). A
//! policy file is one source of it; the control layer knows nothing of its format.

use crate::domain::PolicySpec;

use super::policy_diff::WrittenFields;

/// The most errors one answer about a desired list names; the rest are counted.
pub const ERRORS_SHOWN: usize = 100;

pub struct Desired {
    /// The applications it speaks for (with prune, their policies it does not list go).
    pub apps: Vec<String>,
    pub specs: Vec<PolicySpec>,
    /// How its source writes a policy's fields, for the changes a plan shows.
    pub written: WrittenFields,
}
