//! What one policy file may make a reader do, checked in one pass over its YAML events
//! (JSON is YAML too) before it is read into policies: its size, how deep it nests, how
//! many values and policies it holds, an alias counted as the values it repeats. A file
//! over a cap is refused, naming the cap, at the cost of that pass alone, which stops at
//! the first cap it meets.
//!
//! Why a pass of its own: serde_norway (libyaml) loads a whole document before serde sees
//! any of it, spends time quadratic in flow nesting depth while doing so, and expands
//! aliases into copies; a file of a few hundred KB could hold a worker for minutes or
//! expand to gigabytes. saphyr-parser hands out one event at a time, so the pass stops as
//! soon as a cap is passed, and the caps bound what serde_norway then does.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, Span};

/// The caps of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Bytes of text.
    pub bytes: usize,
    /// Collections inside collections. A policy file needs 7: a list of documents, an
    /// application's document, its policies, a policy, its descriptor patterns, a
    /// pattern, its entries.
    pub depth: usize,
    /// Values (scalars, lists, mappings), each alias counted as the values it repeats.
    pub values: usize,
    /// Policies in all the file's documents.
    pub policies: usize,
}

impl Caps {
    /// The caps of a file planned or applied through the admin API or the CLI: room for
    /// 100,000 policies of about ten fields each.
    pub const FILE: Caps = Caps {
        bytes: 16 * 1024 * 1024,
        depth: 16,
        values: 2_000_000,
        policies: 100_000,
    };

    /// The same caps for a smaller body (the console's form takes less).
    pub const fn with_bytes(self, bytes: usize) -> Caps {
        Caps { bytes, ..self }
    }
}

/// Why a file was refused before it was read.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Larger than the cap: the whole body, before any reading.
    TooLarge { bytes: usize, cap: usize },
    /// Over another cap, or not YAML at all: the document and line where that was found.
    At {
        document: usize,
        line: usize,
        message: String,
    },
}

/// One open collection.
struct Open {
    mapping: bool,
    /// Items (a mapping's keys and values both) so far.
    items: usize,
    /// Values counted when it opened, to size an anchored collection.
    values_before: usize,
    anchor: usize,
    /// A list that is the value of a `policies` key: its items are policies.
    of_policies: bool,
    /// In a mapping: the last key was `policies`.
    policies_key: bool,
}

/// What an anchor holds, for the aliases that repeat it.
#[derive(Clone, Copy)]
struct Anchored {
    values: usize,
    /// Policies, if it is a list of them.
    policies: usize,
    /// Items, if it is a list (an alias as the value of `policies`).
    items: usize,
}

/// Checks `text` against `caps`, reading its YAML events once.
pub fn check(text: &str, caps: Caps) -> Result<(), Refusal> {
    if text.len() > caps.bytes {
        return Err(Refusal::TooLarge {
            bytes: text.len(),
            cap: caps.bytes,
        });
    }
    let mut count = Count {
        caps,
        document: 0,
        values: 0,
        policies: 0,
        open: Vec::new(),
        anchors: HashMap::new(),
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            // The scanner's own limit on flow nesting (255), met before our depth was seen
            // (it reads ahead for keys).
            let message = if e.info() == "recursion limit exceeded" {
                too_deep(caps)
            } else {
                format!("not YAML: {}", e.info())
            };
            Refusal::At {
                document: count.document.max(1),
                line: e.marker().line(),
                message,
            }
        })?;
        count.event(event, span)?;
    }
    Ok(())
}

fn too_deep(caps: Caps) -> String {
    format!(
        "nests deeper than {} levels, the most a policy file may",
        caps.depth
    )
}

struct Count {
    caps: Caps,
    document: usize,
    values: usize,
    policies: usize,
    open: Vec<Open>,
    anchors: HashMap<usize, Anchored>,
}

impl Count {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), Refusal> {
        let line = span.start.line();
        match event {
            Event::DocumentStart(_) => self.document += 1,
            Event::Scalar(value, _, anchor, _) => {
                let is_policies_key = self.is_key() && value == "policies";
                self.item(1, 0, line)?;
                if anchor != 0 {
                    let one = Anchored {
                        values: 1,
                        policies: 0,
                        items: 0,
                    };
                    self.anchors.insert(anchor, one);
                }
                if is_policies_key && let Some(parent) = self.open.last_mut() {
                    parent.policies_key = true;
                }
            }
            Event::Alias(anchor) => {
                let repeated = self.anchors.get(&anchor).copied().unwrap_or(Anchored {
                    values: 1,
                    policies: 0,
                    items: 0,
                });
                let as_policies = if self.is_policies_value() {
                    repeated.items
                } else {
                    repeated.policies
                };
                self.item(repeated.values, as_policies, line)?;
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                let mapping = matches!(event, Event::MappingStart(..));
                let of_policies = !mapping && self.is_policies_value();
                self.item(1, 0, line)?;
                self.open.push(Open {
                    mapping,
                    items: 0,
                    values_before: self.values - 1,
                    anchor,
                    of_policies,
                    policies_key: false,
                });
                if self.open.len() > self.caps.depth {
                    return Err(self.refuse(line, too_deep(self.caps)));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(closed) = self.open.pop()
                    && closed.anchor != 0
                {
                    let anchored = Anchored {
                        values: self.values - closed.values_before,
                        policies: if closed.of_policies { closed.items } else { 0 },
                        items: if closed.mapping { 0 } else { closed.items },
                    };
                    self.anchors.insert(closed.anchor, anchored);
                }
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
        Ok(())
    }

    /// Whether the next node is a key of the innermost mapping.
    fn is_key(&self) -> bool {
        self.open
            .last()
            .is_some_and(|o| o.mapping && o.items % 2 == 0)
    }

    /// Whether the next node is the value of a `policies` key.
    fn is_policies_value(&self) -> bool {
        self.open
            .last()
            .is_some_and(|o| o.mapping && o.items % 2 == 1 && o.policies_key)
    }

    /// A node of `values` values (more than 1 for an alias) as the next item of the
    /// innermost collection, holding `policies` policies itself.
    fn item(&mut self, values: usize, policies: usize, line: usize) -> Result<(), Refusal> {
        self.values = self.values.saturating_add(values);
        let mut policies = policies;
        if let Some(parent) = self.open.last_mut() {
            if parent.mapping && parent.items % 2 == 0 {
                // A key: whether it is `policies` is for the caller to say.
                parent.policies_key = false;
            }
            parent.items += 1;
            if parent.of_policies {
                policies += 1;
            }
        }
        self.policies = self.policies.saturating_add(policies);
        if self.values > self.caps.values {
            return Err(self.refuse(
                line,
                format!(
                    "holds more than {} values (an alias counts as the values it repeats), the most a policy file may",
                    self.caps.values
                ),
            ));
        }
        if self.policies > self.caps.policies {
            return Err(self.refuse(
                line,
                format!(
                    "lists more than {} policies, the most one file may",
                    self.caps.policies
                ),
            ));
        }
        Ok(())
    }

    fn refuse(&self, line: usize, message: String) -> Refusal {
        Refusal::At {
            document: self.document.max(1),
            line,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Caps = Caps {
        bytes: 20_000,
        depth: 8,
        values: 200,
        policies: 5,
    };

    fn message(text: &str) -> String {
        match check(text, SMALL) {
            Err(Refusal::At { message, .. }) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_ordinary_file_passes() {
        let file = "app: shop\npolicies:\n  - name: a\n    max_permits: 1\n    allowed_apps: [shop, web]\n    overrides:\n      - match: vip\n        max_permits: 2\n";
        assert_eq!(check(file, SMALL), Ok(()));
        let json = r#"[{"app": "shop", "policies": [{"name": "a", "max_permits": 1}]}]"#;
        assert_eq!(check(json, SMALL), Ok(()));
    }

    #[test]
    fn each_cap_is_named() {
        assert_eq!(
            check(&"#".repeat(20_001), SMALL),
            Err(Refusal::TooLarge {
                bytes: 20_001,
                cap: 20_000
            })
        );
        let deep = format!("app: a\npolicies: {}{}", "[".repeat(50), "]".repeat(50));
        let deeper = format!("app: a\npolicies: {}{}", "[".repeat(4000), "]".repeat(4000));
        assert!(message(&deeper).starts_with("nests deeper than 8 levels"));
        assert_eq!(
            check(&deep, SMALL),
            Err(Refusal::At {
                document: 1,
                line: 2,
                message: "nests deeper than 8 levels, the most a policy file may".into()
            })
        );
        let many = format!("app: a\npolicies: []\nx: [{}]", "1, ".repeat(300));
        assert!(message(&many).starts_with("holds more than 200 values"));
        let policies = "app: a\npolicies:\n- {name: a}\n- {name: b}\n- {name: c}\n- {name: d}\n- {name: e}\n- {name: f}\n";
        assert_eq!(
            message(policies),
            "lists more than 5 policies, the most one file may"
        );
        assert!(message("app: [a\n").starts_with("not YAML: "));
    }

    #[test]
    fn aliases_count_as_what_they_repeat() {
        // Each level repeats the one before it ten times: 10^4 values from a few lines.
        let bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n";
        assert!(message(bomb).starts_with("holds more than 200 values"));
        // Policies repeated by an alias, as a whole list or one by one.
        let list = "- app: a\n  policies: &p [{name: a}, {name: b}, {name: c}]\n- app: b\n  policies: *p\n";
        assert_eq!(
            message(list),
            "lists more than 5 policies, the most one file may"
        );
        let items = "app: a\npolicies: [&p {name: a}, *p, *p, *p, *p, *p]\n";
        assert_eq!(
            message(items),
            "lists more than 5 policies, the most one file may"
        );
    }
}
