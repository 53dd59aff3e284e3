//! HTML and XML escaping.

/// Escape text for HTML/XML content and double- or single-quoted attribute values.
///
/// ```
/// use perfbisect_report::html::escape;
/// assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
/// ```
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A link to `url` showing `text`, only for http(s) URLs; anything else (a
/// `javascript:` URL, a path) is shown as escaped text.
pub fn link(url: &str, text: &str) -> String {
    let lower = url.trim_start().to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        format!("<a href=\"{}\">{}</a>", escape(url), escape(text))
    } else {
        escape(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_only_for_http() {
        assert_eq!(
            link("https://x/?a=1&b=\"2\"", "x"),
            "<a href=\"https://x/?a=1&amp;b=&quot;2&quot;\">x</a>"
        );
        assert_eq!(link("javascript:alert(1)", "<b>"), "&lt;b&gt;");
    }
}
