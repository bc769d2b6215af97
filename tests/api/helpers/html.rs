//! One answer of the console (`Page`), read as a browser reads it: its status, headers,
//! alerts and forms, with HTML unescaping and form encoding.

use reqwest::StatusCode;
use serde_json::Value;

/// One answer of the console, as the browser received it (redirects are not followed).
pub struct Page {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Page {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub fn location(&self) -> Option<&str> {
        self.header("location")
    }

    /// Asserts a `303 See Other` to `location`.
    #[track_caller]
    pub fn assert_redirect(&self, location: &str) {
        assert_eq!(
            (self.status, self.location()),
            (StatusCode::SEE_OTHER, Some(location)),
            "expected a redirect to {location}; body: {}",
            self.body
        );
    }

    /// Asserts the status, showing the body when it is wrong.
    #[track_caller]
    pub fn assert_status(&self, status: StatusCode) -> &Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        self
    }

    pub fn has(&self, needle: &str) -> bool {
        self.body.contains(needle)
    }

    /// The whole `Set-Cookie` header that sets cookie `name`.
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .find(|c| c.split('=').next() == Some(name))
    }

    /// The text of the element whose id is `id` (tags left out, spaces collapsed).
    pub fn text_of(&self, id: &str) -> Option<String> {
        let at = self.body.find(&format!("id=\"{id}\""))?;
        element_text(&self.body, at)
    }

    /// The text of the first element with `role="alert"`.
    pub fn alert(&self) -> Option<String> {
        let at = self.body.find("role=\"alert\"")?;
        let rest = &self.body[at..];
        let start = rest.find('>')? + 1;
        let end = rest[start..].find("</")? + start;
        Some(html_unescape(&rest[start..end]))
    }

    /// The fields the form posting to `action` sends as it stands, as a browser sends
    /// them: text inputs and textareas with their values, checked checkboxes, the selected
    /// (or else the first) option of each select.
    #[track_caller]
    pub fn form(&self, action: &str) -> Vec<(String, String)> {
        let html = form_html(&self.body, action)
            .unwrap_or_else(|| panic!("no form posting to {action}; body: {}", self.body));
        form_fields(html)
    }

    /// The value the form posting to `action` sends for `field`.
    #[track_caller]
    pub fn field(&self, action: &str, field: &str) -> Option<String> {
        self.form(action)
            .into_iter()
            .find(|(name, _)| name == field)
            .map(|(_, value)| value)
    }

    /// The opening tags of every `<form>` of the page.
    pub fn form_tags(&self) -> Vec<String> {
        self.body
            .match_indices("<form")
            .map(|(i, _)| {
                let end = self.body[i..].find('>').unwrap() + i;
                self.body[i..=end].to_owned()
            })
            .collect()
    }

    /// The page's session CSRF token (every signed-in page has it in the sign-out form).
    pub fn csrf(&self) -> Option<String> {
        let at = self.body.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
        let end = self.body[at..].find('"')? + at;
        Some(html_unescape(&self.body[at..end]))
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// The HTML of the first form whose action is `action`.
fn form_html<'a>(body: &'a str, action: &str) -> Option<&'a str> {
    body.match_indices("<form").find_map(|(i, _)| {
        let open_end = body[i..].find('>')? + i;
        let attrs = tag_attributes(&body[i + "<form".len()..open_end]);
        let matches = attrs
            .iter()
            .any(|(k, v)| k == "action" && v.as_deref() == Some(action));
        let end = body[i..].find("</form>")? + i;
        matches.then(|| &body[i..end])
    })
}

/// `name="value"` and bare attributes of a tag (the text between its name and `>`).
fn tag_attributes(tag: &str) -> Vec<(String, Option<String>)> {
    let mut attrs = Vec::new();
    let mut rest = tag.trim_start();
    while !rest.is_empty() && !rest.starts_with('>') && !rest.starts_with('/') {
        let name_end = rest
            .find(|c: char| c == '=' || c.is_whitespace() || c == '>')
            .unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_lowercase();
        rest = &rest[name_end..];
        if let Some(after_eq) = rest.strip_prefix('=') {
            let (value, after) = if let Some(quoted) = after_eq.strip_prefix('"') {
                let end = quoted.find('"').unwrap_or(quoted.len());
                (&quoted[..end], &quoted[(end + 1).min(quoted.len())..])
            } else {
                let end = after_eq
                    .find(|c: char| c.is_whitespace() || c == '>')
                    .unwrap_or(after_eq.len());
                (&after_eq[..end], &after_eq[end..])
            };
            attrs.push((name, Some(html_unescape(value))));
            rest = after;
        } else {
            attrs.push((name, None));
        }
        rest = rest.trim_start();
    }
    attrs
}

fn attribute<'a>(attrs: &'a [(String, Option<String>)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_deref().unwrap_or(""))
}

/// What a browser submits for this form's HTML.
fn form_fields(html: &str) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    let mut at = 0;
    while let Some(offset) = html[at..].find('<') {
        let start = at + offset;
        let tag_end = match html[start..].find('>') {
            Some(e) => start + e,
            None => break,
        };
        let tag = &html[start + 1..tag_end];
        let kind = tag
            .split(|c: char| c.is_whitespace())
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let attrs = tag_attributes(&tag[kind.len()..]);
        let name = attribute(&attrs, "name").map(str::to_owned);
        at = tag_end + 1;
        match (kind.as_str(), name) {
            ("input", Some(name)) => {
                let value = attribute(&attrs, "value").unwrap_or("").to_owned();
                match attribute(&attrs, "type").unwrap_or("text") {
                    "checkbox" | "radio" => {
                        if attribute(&attrs, "checked").is_some() {
                            let value = attribute(&attrs, "value").unwrap_or("on").to_owned();
                            fields.push((name, value));
                        }
                    }
                    "submit" | "button" | "reset" | "image" => {}
                    _ => fields.push((name, value)),
                }
            }
            ("textarea", Some(name)) => {
                let end = html[at..]
                    .find("</textarea>")
                    .map_or(html.len(), |e| at + e);
                let text = html[at..end].strip_prefix('\n').unwrap_or(&html[at..end]);
                fields.push((name, html_unescape(text)));
                at = end;
            }
            ("select", Some(name)) => {
                let end = html[at..].find("</select>").map_or(html.len(), |e| at + e);
                let options: Vec<Vec<(String, Option<String>)>> = html[at..end]
                    .match_indices("<option")
                    .map(|(i, _)| {
                        let o = at + i + "<option".len();
                        let close = html[o..].find('>').map_or(end, |e| o + e);
                        tag_attributes(&html[o..close])
                    })
                    .collect();
                let chosen = options
                    .iter()
                    .find(|o| attribute(o, "selected").is_some())
                    .or(options.first());
                if let Some(option) = chosen {
                    fields.push((name, attribute(option, "value").unwrap_or("").to_owned()));
                }
                at = end;
            }
            _ => {}
        }
    }
    fields
}

/// Undoes HTML escaping: named entities askama and browsers use, and numeric ones.
/// The text of the element one of whose attributes starts at `at` in `html`, up to its
/// own closing tag (tags left out, spaces collapsed).
fn element_text(html: &str, at: usize) -> Option<String> {
    let open = html[..at].rfind('<')?;
    let tag: String = html[open + 1..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let (opening, closing) = (format!("<{tag}"), format!("</{tag}>"));
    let mut depth = 0usize;
    let mut i = open;
    loop {
        let next_open = html[i + 1..].find(&opening).map(|n| n + i + 1);
        let next_close = html[i + 1..].find(&closing).map(|n| n + i + 1)?;
        match next_open {
            Some(o) if o < next_close => {
                depth += 1;
                i = o;
            }
            _ if depth > 0 => {
                depth -= 1;
                i = next_close;
            }
            _ => {
                let text = html_unescape(&strip_tags(&html[open..next_close]));
                return Some(text.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
}

/// The text of some HTML, its tags left out.
pub fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

pub fn html_unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';').filter(|&i| i <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `application/x-www-form-urlencoded`, as a browser encodes a form.
pub fn form_encode<K: AsRef<str>, V: AsRef<str>>(fields: &[(K, V)]) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                percent_encode(k.as_ref()),
                percent_encode(v.as_ref())
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes everything but unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The text of the cell `column` (its `data-col`) in the row of `policy` of an
/// application page's policies table.
pub fn cell(page: &Page, policy: &str, column: &str) -> String {
    let row = page
        .body
        .find(&format!("<tr data-policy=\"{policy}\""))
        .unwrap_or_else(|| panic!("no row of {policy}: {}", page.body));
    let row = &page.body[row..];
    let row = &row[..row.find("</tr>").unwrap()];
    let at = row
        .find(&format!("data-col=\"{column}\""))
        .unwrap_or_else(|| panic!("no cell {column} in the row of {policy}"));
    element_text(row, at).unwrap_or_else(|| panic!("cell {column} of {policy} is not closed"))
}
