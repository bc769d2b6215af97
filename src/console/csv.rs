//! CSV as spreadsheets read it (RFC 4180): fields quoted when they hold a comma, a quote or
//! a line break, lines ended by CRLF. A field that a spreadsheet would run as a formula
//! (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with `'`, so an
//! exported value typed by someone else (a description, a key) cannot run in the reader's
//! spreadsheet.

/// One line of CSV, CRLF included.
pub fn line<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = fields
        .iter()
        .map(|f| field(f.as_ref()))
        .collect::<Vec<_>>()
        .join(",");
    out.push_str("\r\n");
    out
}

fn field(value: &str) -> String {
    let guarded = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_owned()
    };
    if guarded.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_and_formulas_disarmed() {
        assert_eq!(line(&["a", "b c"]), "a,b c\r\n");
        assert_eq!(
            line(&["x,y", "say \"hi\"", "two\nlines"]),
            "\"x,y\",\"say \"\"hi\"\"\",\"two\nlines\"\r\n"
        );
        assert_eq!(
            line(&["=1+1", "+x", "-2", "@SUM(A1)", "ok=1"]),
            "'=1+1,'+x,'-2,'@SUM(A1),ok=1\r\n"
        );
        assert_eq!(
            line(&["=HYPERLINK(\"x\",\"y\")"]),
            "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\"\r\n"
        );
    }
}
