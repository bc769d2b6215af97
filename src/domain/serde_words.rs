//! serde's messages name Rust's types (`expected i64`, `integer ... as u128`, `a
//! sequence`): said in the words of the people who read the API's and the policy files'
//! errors.

/// serde's message with its names of Rust types (`i64`, `u128`, a sequence) in the
/// words of the people who read it.
pub fn in_plain_words(message: &str) -> String {
    const WORDS: [(&str, &str); 14] = [
        (" as u128", ""),
        (" as i128", ""),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected u64", "expected a whole number from 0"),
        ("expected u32", "expected a whole number from 0"),
        ("expected u16", "expected a whole number from 0"),
        ("expected u8", "expected a whole number from 0"),
        ("expected usize", "expected a whole number from 0"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("invalid type: sequence", "invalid type: a list"),
        ("expected a boolean", "expected true or false"),
    ];
    let mut message = message.to_owned();
    for (rust, file) in WORDS {
        message = message.replace(rust, file);
    }
    message.replace("invalid type: map", "invalid type: a mapping")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_types_are_not_named() {
        assert_eq!(
            in_plain_words("invalid type: integer `99999999999999999999` as u128, expected i64"),
            "invalid type: integer `99999999999999999999`, expected a whole number"
        );
        assert_eq!(
            in_plain_words("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            in_plain_words("invalid type: map, expected a sequence"),
            "invalid type: a mapping, expected a list"
        );
    }
}
