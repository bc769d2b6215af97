//! Where in a document a value is, said as people count: from one, lists by their items.

/// A field's path as people count: `policies[0].overrides[1].rate` is "policy 1, override
/// 2, rate" (the path itself, 0-based as JSON paths are, stays in an API's `field`).
pub fn place_in_words(path: &str) -> String {
    path.split('.')
        .flat_map(|segment| segment.split_inclusive(']'))
        .map(
            |part| match part.strip_suffix(']').and_then(|p| p.split_once('[')) {
                Some((list, index)) => {
                    let n = index
                        .parse::<usize>()
                        .map_or(index.to_owned(), |i| (i + 1).to_string());
                    match list {
                        "policies" => format!("policy {n}"),
                        "overrides" => format!("override {n}"),
                        "descriptors" => format!("descriptor {n}"),
                        "" => format!("item {n}"),
                        other => format!("{other} item {n}"),
                    }
                }
                None => part.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_from_one() {
        assert_eq!(place_in_words("policies[0].rate"), "policy 1, rate");
        assert_eq!(
            place_in_words("policies[2].overrides[0].max_permits"),
            "policy 3, override 1, max_permits"
        );
        assert_eq!(
            place_in_words("policies[0].allowed_apps[1]"),
            "policy 1, allowed_apps item 2"
        );
        assert_eq!(place_in_words("file"), "file");
    }
}
