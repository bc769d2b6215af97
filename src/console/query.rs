//! Query string fields that say what is wrong with them in words: a page number typed
//! as "two" is "page must be a whole number from 1", not a parser's message.

use serde::{Deserialize, Deserializer};

/// `?page=`: a whole number from 1 (left out or empty: the first page).
pub fn page_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    let text = String::deserialize(deserializer)?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<u32>() {
        Ok(page) if page >= 1 => Ok(Some(page)),
        _ => Err(serde::de::Error::custom(format!(
            "page must be a whole number from 1, not {:?}",
            text.chars().take(20).collect::<String>()
        ))),
    }
}
