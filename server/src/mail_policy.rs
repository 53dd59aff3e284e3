//! Limits on what a submitter may put into a mail: how many recipients a bisect names, and
//! which extra headers it may add. The headers perfbisect writes itself (`From`,
//! `Message-ID`, `Date`, the recipients, threading, `MIME-Version` and every `Content-*`)
//! are reserved, so a submitter cannot forge a sender or break the message's structure.

/// Most addresses one bisect's `notify` may list (mail to many more is a mailing list).
pub const MAX_RECIPIENTS: usize = 100;

/// Longest address `notify` may hold (RFC 5321's limit on a path is 256 with its brackets).
pub const MAX_ADDRESS_LEN: usize = 254;

/// Most extra headers per bisect.
pub const MAX_EXTRA_HEADERS: usize = 20;

/// Headers only perfbisect writes (lowercase).
const RESERVED: &[&str] = &[
    "from",
    "sender",
    "to",
    "cc",
    "bcc",
    "reply-to",
    "message-id",
    "date",
    "subject",
    "in-reply-to",
    "references",
    "mime-version",
    "return-path",
    "received",
];

/// Extra headers a bisect may add: `X-*`, `List-*`, and a few descriptive ones.
const ALLOWED: &[&str] = &["keywords", "comments", "organization"];

/// Why header `name` may not be added (None: it may).
pub fn refuse_header(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if RESERVED.contains(&lower.as_str()) || lower.starts_with("content-") {
        return Some(format!(
            "`{name}` is written by perfbisect and cannot be set (reserved: From, Message-ID, Content-*, the recipients, Date, Subject and threading)"
        ));
    }
    if lower.starts_with("x-") || lower.starts_with("list-") || ALLOWED.contains(&lower.as_str()) {
        return None;
    }
    Some(format!(
        "`{name}` is not an allowed extra header (allowed: X-*, List-*, Keywords, Comments, Organization)"
    ))
}

#[cfg(test)]
mod tests {
    use super::refuse_header;

    #[test]
    fn reserved_headers_are_refused_and_extra_ones_allowed() {
        for h in [
            "From",
            "message-id",
            "Content-Type",
            "CONTENT-Transfer-Encoding",
            "Bcc",
        ] {
            assert!(refuse_header(h).is_some(), "{h}");
        }
        for h in ["X-Perf-Team", "List-Id", "Keywords"] {
            assert!(refuse_header(h).is_none(), "{h}");
        }
        assert!(refuse_header("Disposition-Notification-To").is_some());
    }
}
