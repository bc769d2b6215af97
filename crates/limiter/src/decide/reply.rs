//! The contract between the Lua scripts and Rust: what the first integer of a script's
//! reply means, how many integers a reply has, and how many arguments each entry of the
//! batch script takes. The scripts get the codes as a table `REPLY` (`REPLY.DENIED`, ...)
//! and the layout as `BATCH_ARGS`, put in front of them when they are loaded
//! (`client/scripts.rs`), so the two sides cannot drift apart.

/// The integers of one acquire's reply: code, remaining, retry_after_ms, reset_after_ms,
/// limit (max_permits) and the policy's version.
pub const REPLY_LEN: usize = 6;

/// The first integer of a script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Granted,
    Denied,
    /// The policy is disabled: granted, nothing written.
    Unenforced,
    /// A shadow policy's denial: granted, nothing consumed.
    ShadowDenied,
    NoSuchPolicy,
    AppNotAllowed,
    /// Permits not a whole number from 1 to max_permits.
    PermitsRefused,
    /// The policy uses another algorithm; the second integer names it.
    WrongAlgorithm,
    /// A release of a lease that is not held (any more).
    NotHeld,
}

impl Code {
    const ALL: [Self; 9] = [
        Self::Granted,
        Self::Denied,
        Self::Unenforced,
        Self::ShadowDenied,
        Self::NoSuchPolicy,
        Self::AppNotAllowed,
        Self::PermitsRefused,
        Self::WrongAlgorithm,
        Self::NotHeld,
    ];

    /// The integer the scripts answer.
    pub const fn number(self) -> i64 {
        match self {
            Self::Granted => 1,
            Self::Denied => -1,
            Self::Unenforced => 2,
            Self::ShadowDenied => 3,
            Self::NoSuchPolicy => 0,
            Self::AppNotAllowed => -2,
            Self::PermitsRefused => -3,
            Self::WrongAlgorithm => -4,
            Self::NotHeld => -5,
        }
    }

    pub fn of(number: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|code| code.number() == number)
    }

    const fn lua_name(self) -> &'static str {
        match self {
            Self::Granted => "GRANTED",
            Self::Denied => "DENIED",
            Self::Unenforced => "UNENFORCED",
            Self::ShadowDenied => "SHADOW_DENIED",
            Self::NoSuchPolicy => "NO_SUCH_POLICY",
            Self::AppNotAllowed => "APP_NOT_ALLOWED",
            Self::PermitsRefused => "PERMITS_REFUSED",
            Self::WrongAlgorithm => "WRONG_ALGORITHM",
            Self::NotHeld => "NOT_HELD",
        }
    }

    /// The codes as the scripts read them: `local REPLY = {GRANTED = 1, ...}`.
    pub fn lua_table() -> String {
        let entries: Vec<String> = Self::ALL
            .iter()
            .map(|code| format!("{} = {}", code.lua_name(), code.number()))
            .collect();
        format!("local REPLY = {{{}}}\n", entries.join(", "))
    }
}

/// How many arguments an acquire takes after its batch entry's kind and count, by whose
/// bucket it is (one more with an id): the batch script steps from entry to entry by these
/// (its table `BATCH_ARGS`, put ahead of it from here), so the layout is written once.
pub(crate) const GLOBAL_ARGS: usize = 2;
pub(crate) const KEYED_ARGS: usize = 5;
/// A global token bucket's: the policy's configuration follows the permits and the app
/// (`lua/lib/token_bucket_global.lua`).
pub(crate) const TOKEN_BUCKET_ARGS: usize = 8;
/// The kind of a token bucket's entry of the batch script that comes packed in one
/// argument (minus it for a caller's bucket of a keyed policy; `lua/acquire_batch.lua`).
pub(crate) const PACKED_KIND: i64 = 100;

/// Added to a keyed acquire's gate when its bucket's expiry may be held ahead of what the
/// bucket needs (`lua/lib/keyed.lua`'s `keyed_store`), so that the flag travels in the
/// argument every keyed script already reads (`lua/lib/keyed.lua`'s `keyed_gate`).
pub(crate) const HELD_EXPIRY: u8 = 4;

/// `local BATCH_ARGS = {global = 2, keyed = 5, token_bucket = 8, packed = 100}` and
/// `local HELD_EXPIRY = 4`, for the scripts.
pub(crate) fn batch_args_lua_table() -> String {
    format!(
        "local BATCH_ARGS = {{global = {GLOBAL_ARGS}, keyed = {KEYED_ARGS}, \
         token_bucket = {TOKEN_BUCKET_ARGS}, packed = {PACKED_KIND}}}\n\
         local HELD_EXPIRY = {HELD_EXPIRY}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_number_and_reads_back() {
        for code in Code::ALL {
            assert_eq!(Code::of(code.number()), Some(code));
        }
        assert_eq!(Code::of(7), None);
        assert!(Code::lua_table().contains("SHADOW_DENIED = 3"));
    }
}
