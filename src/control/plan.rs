//! A plan: what applying a desired list would do to each policy, and the id that binds an
//! apply to exactly it.

use serde::Serialize;

use super::policy_diff::FieldChange;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    Create,
    Update,
    Unchanged,
    Delete,
}

/// What a plan does to one policy.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PlannedPolicy {
    pub name: String,
    pub app: String,
    pub action: PlanAction,
    /// The stored version the plan was made against; absent for a create.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// For an update: the fields it changes, as the file writes them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Every setting the policy would have (empty for a delete), bound by the plan id:
    /// a create shows no field changes, yet its settings are planned too.
    #[serde(skip)]
    pub settings: String,
}

/// The changes a file makes, and an id to apply exactly these.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Plan {
    /// A digest of the planned policies (their stored versions and every setting they
    /// would have) and the time of the newest change it saw; given back to apply, a
    /// different plan by then is a 409.
    pub plan_id: String,
    /// Whether the changes were made (false for a dry run).
    pub applied: bool,
    pub policies: Vec<PlannedPolicy>,
}
