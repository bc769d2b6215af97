//! The permission rules, in one place. Admins may do everything; an application's owners
//! may edit its policies, members and keys; its viewers may read it.

use crate::domain::MemberRole;
use crate::store::{Author, UserRecord};

/// Whoever makes a request or runs a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `None` for the operator at the command line.
    pub user_id: Option<String>,
    /// Recorded as the audit event's actor.
    pub name: String,
    pub is_admin: bool,
    /// Where the request came from, recorded with each change it makes.
    pub source: Source,
    /// The id the changes of one policy file's apply share in the audit log.
    pub change_set: Option<String>,
    /// Signed in with a read-only access token: it may view what the user may view and
    /// change nothing, whatever the user's role.
    pub read_only: bool,
}

/// Where a change came from: the console, the JSON API (or gRPC), or the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Console,
    Api,
    Cli,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Console => "console",
            Self::Api => "api",
            Self::Cli => "cli",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See an application, its policies, members, keys (never the keys themselves).
    View,
    /// Change its policies, members and keys.
    Edit,
}

impl Actor {
    pub fn from_user(user: &UserRecord, source: Source) -> Self {
        Self {
            user_id: Some(user.id.clone()),
            name: user.username.clone(),
            is_admin: user.is_admin(),
            source,
            change_set: None,
            read_only: false,
        }
    }

    /// The same actor, changing nothing (a read-only access token's).
    pub fn reading_only(self) -> Self {
        Self {
            read_only: true,
            ..self
        }
    }

    /// The same actor, its changes from now on recorded as one change set.
    pub fn in_change_set(&self, id: String) -> Self {
        Self {
            change_set: Some(id),
            ..self.clone()
        }
    }

    /// Who the audit log records, and from where.
    pub fn author(&self) -> Author<'_> {
        Author {
            name: &self.name,
            source: self.source.as_str(),
            change_set: self.change_set.as_deref(),
        }
    }

    /// The operator running a CLI command on the server: trusted like an admin.
    pub fn operator() -> Self {
        Self {
            user_id: None,
            name: "cli".to_owned(),
            is_admin: true,
            source: Source::Cli,
            change_set: None,
            read_only: false,
        }
    }

    /// Whether this actor, whose role in the application is `role`, may do `wanted`.
    pub fn may(&self, role: Option<MemberRole>, wanted: Permission) -> bool {
        if self.read_only && wanted == Permission::Edit {
            return false;
        }
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
            source: Source::Console,
            change_set: None,
            read_only: false,
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

    #[test]
    fn a_read_only_actor_views_and_never_edits() {
        let owner = member().reading_only();
        assert!(owner.may(Some(MemberRole::Owner), Permission::View));
        assert!(!owner.may(Some(MemberRole::Owner), Permission::Edit));
        let admin = Actor {
            is_admin: true,
            ..member()
        }
        .reading_only();
        assert!(admin.may(None, Permission::View));
        assert!(!admin.may(None, Permission::Edit));
    }
}
