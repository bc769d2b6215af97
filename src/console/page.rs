//! What every console page shares: who is signed in (for the navigation and the sign-out
//! form), which section is current, and a one-line notice after a change.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

pub struct Chrome {
    pub user: Option<ChromeUser>,
    pub section: &'static str,
    pub notice: Option<&'static str>,
}

#[derive(Clone)]
pub struct ChromeUser {
    pub name: String,
    pub is_admin: bool,
    /// The session's CSRF token, for every form on the page.
    pub csrf: SecretString,
}

impl Chrome {
    /// For pages shown to nobody in particular (sign-in, errors).
    pub fn anonymous() -> Self {
        Self {
            user: None,
            section: "",
            notice: None,
        }
    }

    /// For error pages of a request whose session is not known (the database may be
    /// what failed): the main navigation without a user's name.
    pub fn error_page() -> Self {
        Self {
            user: None,
            section: "error",
            notice: None,
        }
    }

    /// The session's CSRF token, for the hidden field of a form: the one place it is
    /// exposed, to the page of the session's own user.
    pub fn csrf(&self) -> &str {
        self.user.as_ref().map_or("", |u| u.csrf.expose_secret())
    }

    pub fn with_notice(mut self, notice: &Notice) -> Self {
        self.notice = notice.message();
        self
    }
}

/// `?done=<code>` after a redirect: a fixed message per code, so the query string can
/// never put text of its own on the page.
#[derive(Debug, Default, Deserialize)]
pub struct Notice {
    done: Option<String>,
}

impl Notice {
    pub fn message(&self) -> Option<&'static str> {
        Some(match self.done.as_deref()? {
            "app-created" => "Application created.",
            "app-updated" => "Application saved.",
            "app-deleted" => "Application deleted, with its keys and memberships.",
            "key-rotated" => "Key rotated. The old key works until the time its row shows.",
            "token-revoked" => "Token revoked. It stopped working at once.",
            "policy-created" => "Policy created. Redis has it already.",
            "policy-updated" => "Policy saved.",
            "policy-merged" => {
                "Policy saved, merged with a change someone else saved meanwhile to other \
                 fields: its history shows both."
            }
            "policy-rolled-back" => {
                "Rolled back: a new version with those settings is saved, and Redis has it."
            }
            "policy-recreated" => {
                "Policy created again as it was when it was deleted. Redis has it already."
            }
            "policy-deleted" => "Policy deleted, and its bucket removed from Redis.",
            "bucket-reset" => "Bucket reset to full. The audit log records who did it.",
            "member-saved" => "Member saved.",
            "member-removed" => "Member removed.",
            "key-revoked" => "Key revoked. It stopped working at once.",
            "webhook-rotated" => {
                "New secret made. The previous one keeps signing beside it for 24 hours."
            }
            "webhook-deleted" => "Webhook deleted, with its delivery log.",
            "webhook-sent-again" => "The delivery is due again: it is being sent now.",
            "user-created" => "User created.",
            "user-updated" => "User updated.",
            "password-reset" => "Password reset; the user's sessions were ended.",
            "password-changed" => "Your password was changed; your other sessions were ended.",
            _ => return None,
        })
    }
}

/// What every console page is sent with: a strict Content-Security-Policy (scripts,
/// styles and fetches from this site only, no inline script, never framed), no MIME
/// sniffing, and no full URLs leaked to other sites in `Referer`.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
];
