//! The permission rules, in one place. Admins may do everything; an application's owners
//! may edit its policies, members and keys; its viewers may read it.

use crate::domain::MemberRole;
use crate::store::UserRecord;

/// Whoever makes a request or runs a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `None` for the operator at the command line.
    pub user_id: Option<String>,
    /// Recorded as the audit event's actor.
    pub name: String,
    pub is_admin: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See an application, its policies, members, keys (never the keys themselves).
    View,
    /// Change its policies, members and keys.
    Edit,
}

impl Actor {
    pub fn from_user(user: &UserRecord) -> Self {
        Self {
            user_id: Some(user.id.clone()),
            name: user.username.clone(),
            is_admin: user.is_admin(),
        }
    }

    /// The operator running a CLI command on the server: trusted like an admin.
    pub fn operator() -> Self {
        Self {
            user_id: None,
            name: "cli".to_owned(),
            is_admin: true,
        }
    }

    /// Whether this actor, whose role in the application is `role`, may do `wanted`.
    pub fn may(&self, role: Option<MemberRole>, wanted: Permission) -> bool {
        if self.is_admin {
            return true;
        }
        match (role, wanted) {
            (Some(MemberRole::Owner), _) => true,
            (Some(MemberRole::Viewer), Permission::View) => true,
            (Some(MemberRole::Viewer), Permission::Edit) | (None, _) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member() -> Actor {
        Actor {
            user_id: Some("u1".into()),
            name: "ann".into(),
            is_admin: false,
        }
    }

    #[test]
    fn the_rules() {
        let m = member();
        assert!(m.may(Some(MemberRole::Owner), Permission::Edit));
        assert!(m.may(Some(MemberRole::Viewer), Permission::View));
        assert!(!m.may(Some(MemberRole::Viewer), Permission::Edit));
        assert!(!m.may(None, Permission::View));
        assert!(Actor::operator().may(None, Permission::Edit));
    }
}
