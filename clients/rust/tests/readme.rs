//! The README's quick start is `examples/quickstart.rs`, word for word.

#[test]
fn the_readme_quick_start_is_the_quickstart_example() {
    let readme = include_str!("../README.md");
    let after = readme
        .split("<!-- quickstart -->")
        .nth(1)
        .expect("a <!-- quickstart --> marker");
    let block = after
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a rust block after the marker");
    assert_eq!(block, include_str!("../examples/quickstart.rs"));
}
