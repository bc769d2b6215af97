//! Where things are in a file's text, for errors that name their line: each policy's
//! name line, and a field's line within a policy.

use std::collections::HashMap;

/// The file's lines, with where each policy name is set, found in one pass (a file of
/// 100,000 policies is not searched once per policy).
pub(super) struct Lines<'a> {
    lines: Vec<&'a str>,
    /// The 1-based lines that set `name: <value>`, by value, in file order.
    names: HashMap<&'a str, Vec<usize>>,
    /// How many of each name's lines the policies read so far took.
    taken: std::cell::RefCell<HashMap<&'a str, usize>>,
}

impl<'a> Lines<'a> {
    pub(super) fn of(text: &'a str) -> Self {
        let lines: Vec<&str> = text.lines().collect();
        let mut names: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, line) in lines.iter().enumerate() {
            if key_of(line) == Some("name")
                && let Some(value) = value_of(line)
            {
                names.entry(value).or_default().push(i + 1);
            }
        }
        Self {
            lines,
            names,
            taken: Default::default(),
        }
    }

    /// The line of the next policy named `name`, in file order.
    pub(super) fn of_name(&self, name: &str) -> Option<usize> {
        let (&key, found) = self.names.get_key_value(name)?;
        let mut taken = self.taken.borrow_mut();
        let next = taken.entry(key).or_default();
        let line = found.get(*next).or(found.last()).copied();
        *next += 1;
        line
    }

    /// The line at or after `from` (1-based) that sets `key`, before the next policy's name.
    pub(super) fn field(&self, from: usize, key: &str) -> Option<usize> {
        self.lines
            .get(from - 1..)?
            .iter()
            .enumerate()
            .take_while(|(i, line)| *i == 0 || key_of(line) != Some("name"))
            .find(|(_, line)| key_of(line) == Some(key))
            .map(|(i, _)| from + i)
    }
}

/// The key a YAML or JSON line sets: `  - name: x`, `"name": "x",`.
fn key_of(line: &str) -> Option<&str> {
    let line = line
        .trim_start()
        .trim_start_matches("- ")
        .trim_start_matches('{');
    let (key, _) = line.split_once(':')?;
    Some(key.trim().trim_matches('"').trim_matches('\''))
}

fn value_of(line: &str) -> Option<&str> {
    let (_, value) = line.split_once(':')?;
    let value = value
        .trim()
        .trim_end_matches(',')
        .trim_end_matches('}')
        .trim();
    Some(value.trim_matches('"').trim_matches('\''))
}
