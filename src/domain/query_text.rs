//! A query string's values are text: a value whose percent-decoded bytes are not UTF-8
//! is refused, naming its field. Query extractors decode such bytes to U+FFFD, which
//! would then name another key (`?key=%ff` and `?key=%fe` the same bucket).

use percent_encoding::percent_decode;

/// The name of the first field of `query` (raw, still percent-encoded) whose name or
/// value is not UTF-8 once decoded.
pub fn non_utf8_field(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            let plus_as_space = s.replace('+', " ");
            String::from_utf8(percent_decode(plus_as_space.as_bytes()).collect()).ok()
        };
        let name_text = decode(name);
        match (&name_text, decode(value)) {
            (Some(_), Some(_)) => None,
            (Some(name), None) => Some(name.clone()),
            (None, _) => Some(String::from_utf8_lossy(name.as_bytes()).into_owned()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_that_are_not_text_are_named() {
        assert_eq!(non_utf8_field(""), None);
        assert_eq!(non_utf8_field("key=user%2042&minutes=5"), None);
        assert_eq!(non_utf8_field("key=%E2%9C%93"), None);
        // U+FFFD itself, encoded, is text.
        assert_eq!(non_utf8_field("key=%EF%BF%BD"), None);
        assert_eq!(non_utf8_field("minutes=5&key=%ff"), Some("key".into()));
        assert_eq!(non_utf8_field("key=%E2%9C"), Some("key".into()));
        assert_eq!(non_utf8_field("%ff=1"), Some("%ff".into()));
    }
}
