use serde::Serialize;

use crate::domain::MemberRole;

use super::{StoreResult, Tx, now_ms};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct MemberRecord {
    pub username: String,
    pub role: String,
    pub created_ms: i64,
}

impl Tx {
    /// Sets a user's role in an application; returns the role it had before, if any.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, user_id = %user_id))]
    pub async fn set_membership(
        &mut self,
        app_id: &str,
        user_id: &str,
        role: MemberRole,
    ) -> StoreResult<Option<MemberRole>> {
        let before = self.role_in_app(app_id, user_id).await?;
        if before.is_some() {
            sqlx::query(
                self.sql("UPDATE memberships SET role = ? WHERE app_id = ? AND user_id = ?"),
            )
            .bind(role.as_str())
            .bind(app_id)
            .bind(user_id)
            .execute(&mut *self.inner)
            .await?;
        } else {
            sqlx::query(self.sql(
                "INSERT INTO memberships (app_id, user_id, role, created_ms) VALUES (?, ?, ?, ?)",
            ))
            .bind(app_id)
            .bind(user_id)
            .bind(role.as_str())
            .bind(now_ms())
            .execute(&mut *self.inner)
            .await?;
        }
        Ok(before)
    }

    /// Removes a membership; returns the role it had, `None` if there was none.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, user_id = %user_id))]
    pub async fn delete_membership(
        &mut self,
        app_id: &str,
        user_id: &str,
    ) -> StoreResult<Option<MemberRole>> {
        let before = self.role_in_app(app_id, user_id).await?;
        sqlx::query(self.sql("DELETE FROM memberships WHERE app_id = ? AND user_id = ?"))
            .bind(app_id)
            .bind(user_id)
            .execute(&mut *self.inner)
            .await?;
        Ok(before)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, user_id = %user_id))]
    pub async fn role_in_app(
        &mut self,
        app_id: &str,
        user_id: &str,
    ) -> StoreResult<Option<MemberRole>> {
        let role: Option<String> = sqlx::query_scalar(
            self.sql("SELECT role FROM memberships WHERE app_id = ? AND user_id = ?"),
        )
        .bind(app_id)
        .bind(user_id)
        .fetch_optional(&mut *self.inner)
        .await?;
        Ok(role.as_deref().and_then(MemberRole::from_db))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn list_members(&mut self, app_id: &str) -> StoreResult<Vec<MemberRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT u.username, m.role, m.created_ms FROM memberships m \
             JOIN users u ON u.id = m.user_id WHERE m.app_id = ? ORDER BY u.username",
        ))
        .bind(app_id)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// The slug of each application the user is a member of, with the role there, by
    /// slug: one statement for a page that needs only the roles.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id))]
    pub async fn roles_of_user(
        &mut self,
        user_id: &str,
    ) -> StoreResult<Vec<(String, Option<MemberRole>)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(self.sql(
            "SELECT a.slug, m.role FROM memberships m JOIN apps a ON a.id = m.app_id \
             WHERE m.user_id = ? ORDER BY a.slug",
        ))
        .bind(user_id)
        .fetch_all(&mut *self.inner)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(slug, role)| {
                let role = MemberRole::from_db(&role);
                (slug, role)
            })
            .collect())
    }

    /// How many owners the application has.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn count_owners(&mut self, app_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(
            self.sql("SELECT COUNT(*) FROM memberships WHERE app_id = ? AND role = 'owner'"),
        )
        .bind(app_id)
        .fetch_one(&mut *self.inner)
        .await?)
    }
}
