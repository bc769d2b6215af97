//! The checks of an ID token's claims (OpenID Connect Core 1.0, 3.1.3.7), once its
//! signature has been verified against the provider's keys: it was issued by the
//! configured provider, for this client, for this sign-in (the nonce), and is current.
//! Each refusal says which check failed, for the page the person sees and the log.

use serde::Deserialize;

/// How far the provider's clock may be from ours, in seconds.
pub const LEEWAY_S: i64 = 60;

/// The claims ratekeeper reads of an ID token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IdClaims {
    pub iss: String,
    pub sub: String,
    pub aud: Audience,
    pub exp: i64,
    pub iat: i64,
    #[serde(default)]
    pub nonce: Option<String>,
    /// The authorized party, when the token names several audiences.
    #[serde(default)]
    pub azp: Option<String>,
    #[serde(default)]
    pub preferred_username: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// `aud`: one client id, or several.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn includes(&self, client_id: &str) -> bool {
        match self {
            Self::One(aud) => aud == client_id,
            Self::Many(auds) => auds.iter().any(|a| a == client_id),
        }
    }

    fn is_many(&self) -> bool {
        matches!(self, Self::Many(auds) if auds.len() > 1)
    }
}

/// Why an ID token's claims are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimsRefused {
    #[error("the token was issued by {got:?}, not by the configured provider {expected:?}")]
    Issuer { expected: String, got: String },
    #[error("the token was issued for another client")]
    Audience,
    #[error("the token was issued to another party ({0:?})")]
    AuthorizedParty(Option<String>),
    #[error("the token expired at {0} (Unix seconds)")]
    Expired(i64),
    #[error("the token claims to be issued in the future ({0}, Unix seconds)")]
    IssuedLater(i64),
    #[error("the token belongs to another sign-in (its nonce differs)")]
    Nonce,
    #[error("the token names no subject")]
    NoSubject,
}

impl IdClaims {
    /// Whether these claims may sign someone in: issued by `issuer` for `client_id`, with
    /// the sign-in's `nonce`, and current at `now_s` (give or take [`LEEWAY_S`]).
    pub fn check(
        &self,
        issuer: &str,
        client_id: &str,
        nonce: &str,
        now_s: i64,
    ) -> Result<(), ClaimsRefused> {
        if self.iss != issuer {
            return Err(ClaimsRefused::Issuer {
                expected: issuer.to_owned(),
                got: self.iss.clone(),
            });
        }
        if !self.aud.includes(client_id) {
            return Err(ClaimsRefused::Audience);
        }
        if (self.aud.is_many() || self.azp.is_some()) && self.azp.as_deref() != Some(client_id) {
            return Err(ClaimsRefused::AuthorizedParty(self.azp.clone()));
        }
        if self.exp.saturating_add(LEEWAY_S) <= now_s {
            return Err(ClaimsRefused::Expired(self.exp));
        }
        if self.iat.saturating_sub(LEEWAY_S) > now_s {
            return Err(ClaimsRefused::IssuedLater(self.iat));
        }
        if self.nonce.as_deref() != Some(nonce) {
            return Err(ClaimsRefused::Nonce);
        }
        if self.sub.is_empty() {
            return Err(ClaimsRefused::NoSubject);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://id.example.com";
    const NOW: i64 = 1_800_000_000;

    fn claims() -> IdClaims {
        serde_json::from_value(serde_json::json!({
            "iss": ISSUER,
            "sub": "248289761001",
            "aud": "ratekeeper",
            "exp": NOW + 300,
            "iat": NOW - 5,
            "nonce": "n-0S6_WzA2Mj",
            "preferred_username": "olga",
            "groups": ["sre", "ratekeeper-admins"],
        }))
        .unwrap()
    }

    fn check(c: &IdClaims) -> Result<(), ClaimsRefused> {
        c.check(ISSUER, "ratekeeper", "n-0S6_WzA2Mj", NOW)
    }

    #[test]
    fn good_claims_pass() {
        assert_eq!(check(&claims()), Ok(()));
        // Several audiences, this client the authorized party.
        let several = IdClaims {
            aud: Audience::Many(vec!["ratekeeper".into(), "other".into()]),
            azp: Some("ratekeeper".into()),
            ..claims()
        };
        assert_eq!(check(&several), Ok(()));
        // Within the leeway of either end.
        let skewed = IdClaims {
            exp: NOW - LEEWAY_S + 1,
            iat: NOW + LEEWAY_S,
            ..claims()
        };
        assert_eq!(check(&skewed), Ok(()));
    }

    #[test]
    fn each_bad_claim_is_refused_saying_which() {
        let cases = [
            (
                IdClaims {
                    iss: "https://evil.example.com".into(),
                    ..claims()
                },
                "configured provider",
            ),
            (
                IdClaims {
                    aud: Audience::One("other".into()),
                    ..claims()
                },
                "another client",
            ),
            (
                IdClaims {
                    aud: Audience::Many(vec!["ratekeeper".into(), "other".into()]),
                    azp: None,
                    ..claims()
                },
                "another party",
            ),
            (
                IdClaims {
                    exp: NOW - LEEWAY_S,
                    ..claims()
                },
                "expired",
            ),
            (
                IdClaims {
                    iat: NOW + LEEWAY_S + 1,
                    ..claims()
                },
                "in the future",
            ),
            (
                IdClaims {
                    nonce: Some("another".into()),
                    ..claims()
                },
                "nonce",
            ),
            (
                IdClaims {
                    nonce: None,
                    ..claims()
                },
                "nonce",
            ),
            (
                IdClaims {
                    sub: String::new(),
                    ..claims()
                },
                "no subject",
            ),
        ];
        for (c, says) in cases {
            let refused = check(&c).expect_err(says);
            assert!(refused.to_string().contains(says), "{refused} ({says})");
        }
    }
}
