//! A YAML text as a small tree whose every node knows its line, so that each error of an
//! Envoy config names the line it is about (serde's errors after loading know none).
//! Built from saphyr-parser's events, after the policy files' caps were checked; anchors
//! and aliases are refused (envoyproxy/ratelimit's configs do not need them).

use saphyr_parser::{Event, Parser, ScalarStyle};

use super::EnvoyError;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar as written; `plain` when unquoted (so `~`, `null` and nothing are null).
    Scalar {
        text: String,
        plain: bool,
    },
    List(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// 1-based.
    pub line: usize,
    pub value: Value,
}

impl Node {
    /// A plain `~`, `null` or nothing.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true } if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    pub fn scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// Each document of `text` (a stream of several separated by `---`), as a tree.
pub fn documents(text: &str, document_base: usize) -> Result<Vec<Node>, EnvoyError> {
    let mut builder = Builder {
        documents: Vec::new(),
        open: Vec::new(),
        document_base,
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| EnvoyError {
            document: builder.documents.len() + document_base + 1,
            line: e.marker().line(),
            message: format!("not YAML: {}", e.info()),
        })?;
        builder.event(event, span.start.line())?;
    }
    Ok(builder.documents)
}

/// A collection being read: its node, and a mapping's key waiting for its value.
struct Open {
    node: Node,
    key: Option<Node>,
}

struct Builder {
    documents: Vec<Node>,
    open: Vec<Open>,
    document_base: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, line: usize) -> Result<(), EnvoyError> {
        match event {
            Event::Scalar(text, style, anchor, _) => {
                self.refuse_anchor(anchor, line)?;
                let node = Node {
                    line,
                    value: Value::Scalar {
                        text: text.into_owned(),
                        plain: style == ScalarStyle::Plain,
                    },
                };
                self.add(node);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.refuse_anchor(anchor, line)?;
                let value = if matches!(event, Event::MappingStart(..)) {
                    Value::Map(Vec::new())
                } else {
                    Value::List(Vec::new())
                };
                self.open.push(Open {
                    node: Node { line, value },
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(closed) = self.open.pop() {
                    self.add(closed.node);
                }
            }
            Event::Alias(_) => return Err(self.error(line, ALIASES)),
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => {}
        }
        Ok(())
    }

    fn add(&mut self, node: Node) {
        let Some(parent) = self.open.last_mut() else {
            self.documents.push(node);
            return;
        };
        match &mut parent.node.value {
            Value::List(items) => items.push(node),
            Value::Map(pairs) => match parent.key.take() {
                Some(key) => pairs.push((key, node)),
                None => parent.key = Some(node),
            },
            Value::Scalar { .. } => {}
        }
    }

    fn refuse_anchor(&self, anchor: usize, line: usize) -> Result<(), EnvoyError> {
        if anchor == 0 {
            Ok(())
        } else {
            Err(self.error(line, ALIASES))
        }
    }

    fn error(&self, line: usize, message: &str) -> EnvoyError {
        EnvoyError {
            document: self.documents.len() + self.document_base + 1,
            line,
            message: message.to_owned(),
        }
    }
}

const ALIASES: &str =
    "anchors and aliases are not supported in an Envoy config here: write each descriptor out";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_know_their_lines() {
        let docs = documents(
            "domain: a\ndescriptors:\n  - key: k\n    value: \"v\"\n---\ndomain: b\n",
            0,
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        let Value::Map(pairs) = &docs[0].value else {
            panic!("a mapping")
        };
        let Value::List(list) = &pairs[1].1.value else {
            panic!("a list")
        };
        assert_eq!(list[0].line, 3);
        let Value::Map(entry) = &list[0].value else {
            panic!("a mapping")
        };
        assert_eq!(entry[1].1.line, 4);
        assert_eq!(entry[1].1.scalar(), Some("v"));
        assert!(!entry[1].1.is_null());
        let refused = documents("a: &x 1\nb: *x\n", 0).unwrap_err();
        assert_eq!(refused.line, 1);
    }
}
