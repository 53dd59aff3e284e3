//! From a bisect to the bytes of its mail: the report (rendered by `perfbisect_report`),
//! the headers, and the body as mailing lists take it: one text/plain part in 7bit or 8bit
//! (never quoted-printable, which mangles the table), the job spec and kernel config
//! attached as text, and an HTML alternative only where the operator turned it on.
//! Every mail of a bisect threads under its `started` mail and under the message id the
//! submitter gave (`MailOptions::in_reply_to`).

use super::recipients::Recipients;
use super::{Event, MailSettings};
use crate::report_input::Loaded;
use lettre::message::header::{
    ContentDisposition, ContentTransferEncoding, ContentType, HeaderName, HeaderValue,
};
use lettre::message::{Body, Mailbox, Mailboxes, MultiPart, SinglePart};
use perfbisect_report::{Report, ReportError, ReportInput};
use std::time::SystemTime;

#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    #[error("the report cannot be rendered: {0}")]
    Report(#[from] ReportError),
    #[error("header `{0}` is not valid")]
    Header(String),
    #[error("`{0}` is not a mailbox")]
    Mailbox(String),
    #[error("building the message: {0}")]
    Email(#[from] lettre::error::Error),
    #[error("the envelope: {0}")]
    Envelope(#[from] lettre::address::AddressError),
    #[error("{0}: a line is longer than SMTP's 998 characters or holds a NUL byte")]
    Unsendable(String),
    #[error("composing the mail failed: {0}")]
    Panicked(String),
}

/// Per-bisect options: threading onto a posted patch, another Reply-To, extra headers.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct MailOptions {
    /// Message-ID of the mail to reply to (a posted patch), e.g. `<20240101.123@example.org>`;
    /// also sent as `References`.
    #[serde(default)]
    pub in_reply_to: Option<String>,
    /// Overrides the server's Reply-To for this bisect.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Extra headers, `[name, value]`, added after the server's (`X-*`, `List-*`,
    /// `Keywords`, `Comments`, `Organization`; see `mail_policy`).
    #[serde(default)]
    #[schema(value_type = Vec<Vec<String>>)]
    pub headers: Vec<(String, String)>,
}

impl MailOptions {
    pub async fn load(db: &sqlx::PgPool, bisect: i64) -> sqlx::Result<MailOptions> {
        let row = crate::store::mail_options::get(db, bisect).await?;
        Ok(match row {
            Some(r) => MailOptions {
                in_reply_to: r.in_reply_to,
                reply_to: r.reply_to,
                headers: serde_json::from_value(r.headers).unwrap_or_default(),
            },
            None => MailOptions::default(),
        })
    }
}

/// The subject, text and HTML of one mail.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    pub subject: String,
    pub text: String,
    pub html: String,
}

impl From<Report> for Content {
    fn from(r: Report) -> Self {
        Content {
            subject: r.subject,
            text: r.text,
            html: r.html,
        }
    }
}

/// The content of a mail about `event`.
pub fn content(
    loaded: &Loaded,
    event: Event,
    settings: &MailSettings,
) -> Result<Content, ReportError> {
    match event {
        Event::Started => Ok(started(&loaded.input)),
        Event::Reproduced => Ok(reproduced(&loaded.input)),
        _ => perfbisect_report::render(&loaded.input, &settings.report).map(Content::from),
    }
}

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// "Started" is announced in a few lines; the report comes when the bisect ends.
fn started(input: &ReportInput) -> Content {
    let subject = announcement_subject(input);
    let mut t = format!(
        "Hello,\n\n{} started bisecting a change of {} in:\n\n{}{}\n\ntestcase: {}\n",
        input.robot.name,
        input.metric,
        endpoints(input),
        input.repository.url,
        input.job.testcase
    );
    let params: Vec<_> = input.job.printed_parameters().collect();
    if !params.is_empty() {
        t += "parameters:\n\n";
        for (k, v) in params {
            t += &format!("\t{k}: {v}\n");
        }
    }
    plain(subject, with_closing(t, input))
}

/// `good: <sha> ("subject")` and `bad:  …`, a line each.
fn endpoints(input: &ReportInput) -> String {
    format!(
        "good: {} (\"{}\")\nbad:  {} (\"{}\")\n",
        input.good.sha, input.good.subject, input.bad.sha, input.bad.subject
    )
}

/// The subject of the bisect's announcement: `[repo] metric: bisecting good..bad`.
fn announcement_subject(input: &ReportInput) -> String {
    format!(
        "[{}] {}: bisecting {}..{}",
        input.repository.short_name(),
        input.metric,
        input.good.short(10),
        input.bad.short(10)
    )
}

/// A progress mail: the endpoints reproduced the change, and what finishing is predicted to
/// cost. A reply in the announcement's thread, in a few lines.
fn reproduced(input: &ReportInput) -> Content {
    let subject = format!("Re: {}", announcement_subject(input));
    let findings = input.findings.as_ref();
    let size = match findings.and_then(|f| f.change) {
        Some(c) => format!("a {} change", perfbisect_report::findings::signed_pct(c)),
        None => "the change".to_string(),
    };
    let mut t = format!(
        "Hello,\n\n{} reproduced {size} of {} between\n\n{}\nand is now searching the commits in between for the one that made it.\n",
        input.robot.name,
        input.metric,
        endpoints(input),
    );
    if let Some(b) = findings.and_then(|f| f.budget.as_ref()) {
        t += &format!(
            "Runs so far: {} of a budget of {}.\n",
            b.runs_done, b.max_runs
        );
    }
    if let Some(more) = findings.and_then(|f| f.more.as_ref()) {
        t += &format!("Predicted to finish: {}.\n", more.phrase());
    }
    plain(subject, with_closing(t, input))
}

/// A progress mail's last lines: when the report comes, where to follow, the signature.
fn with_closing(mut t: String, input: &ReportInput) -> String {
    t += "\nThe report follows when the bisect ends.\n";
    if let Some(u) = &input.dashboard_url {
        t += &format!("Progress: {u}\n");
    }
    t += &format!("\n-- \n{}\n", input.robot.name);
    t
}

/// A short mail's content: its text, and the same text as HTML where that is turned on.
fn plain(subject: String, text: String) -> Content {
    let html = format!(
        "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n</head>\n<body>\n<pre>{}</pre>\n</body>\n</html>\n",
        escape_html(&subject),
        escape_html(&text)
    );
    Content {
        subject,
        text,
        html,
    }
}

/// `<key@domain>`: the key is fixed when the outbox row is written.
pub fn message_id(key: &str, settings: &MailSettings) -> String {
    format!("<{key}@{}>", settings.message_id_domain())
}

/// Puts the report's "To reproduce" section (job spec and kconfig links, the submit line,
/// commit links) into a final report's text; the progress mails have none.
pub async fn add_materials(
    db: &sqlx::PgPool,
    bisect: i64,
    event: Event,
    public_url: &str,
    content: &mut Content,
) -> sqlx::Result<()> {
    if event.is_progress() {
        return Ok(());
    }
    if let Some(m) = crate::materials::load(db, bisect, public_url).await? {
        content.text = perfbisect_report::materials::insert(&content.text, &m);
    }
    Ok(())
}

/// A text file attached to a mail (the job spec, the kernel config).
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub filename: String,
    pub text: String,
}

/// What a mail carries besides its report: the materials to reproduce it, and the thread
/// it belongs to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    pub attachments: Vec<Attachment>,
    /// The Message-ID of the bisect's `started` mail, when it has one: later mails reply
    /// to it, so one bisect reads as one thread.
    pub thread_root: Option<String>,
}

/// The job spec as submitted (and the kernel config it names, if stored), and the thread
/// root of `bisect`'s mails. A `started` mail is its own root.
pub async fn extras(
    db: &sqlx::PgPool,
    bisect: i64,
    event: Event,
    settings: &MailSettings,
) -> sqlx::Result<Extras> {
    let row = crate::store::jobs::attachments(db, bisect).await?;
    let mut attachments = Vec::new();
    if let Some(crate::store::jobs::Attachments {
        yaml,
        kconfig_name,
        kconfig,
    }) = row
    {
        attachments.push(Attachment {
            filename: "job.yaml".into(),
            text: yaml,
        });
        if let (Some(name), Some(text)) = (kconfig_name, kconfig) {
            attachments.push(Attachment {
                filename: format!("config-{name}"),
                text,
            });
        }
    }
    let thread_root = if event == Event::Started {
        None
    } else {
        let key = crate::store::outbox::started_key(db, bisect).await?;
        key.map(|k| message_id(&k, settings))
    };
    Ok(Extras {
        attachments,
        thread_root,
    })
}

/// A text part in 7bit (ASCII) or 8bit (UTF-8), lines as written: reports are wider
/// than the 76 columns below which lettre would pick quoted-printable, and mailing lists
/// want the table readable in the raw message. With `filename`, an attachment.
fn text_part(
    text: &str,
    content_type: ContentType,
    filename: Option<&str>,
) -> Result<SinglePart, ComposeError> {
    let what = filename.unwrap_or("the report");
    if text.contains('\0') || text.lines().any(|l| l.len() > 998) {
        return Err(ComposeError::Unsendable(what.to_string()));
    }
    let mut crlf = String::with_capacity(text.len() + text.len() / 40);
    for line in text.lines() {
        crlf.push_str(line);
        crlf.push_str("\r\n");
    }
    let encoding = if crlf.is_ascii() {
        ContentTransferEncoding::SevenBit
    } else {
        ContentTransferEncoding::EightBit
    };
    let body = Body::dangerous_pre_encoded(crlf.into_bytes(), encoding);
    Ok(match filename {
        Some(name) => SinglePart::builder()
            .header(content_type)
            .header(ContentDisposition::attachment(name))
            .body(body),
        None => SinglePart::builder().header(content_type).body(body),
    })
}

/// A whole mail, ready for the envelope.
#[derive(Debug, Clone)]
pub struct Composed {
    pub message_id: String,
    pub subject: String,
    pub envelope_from: String,
    pub recipients: Vec<String>,
    pub raw: Vec<u8>,
}

fn raw_header(name: &str, value: &str) -> Result<HeaderValue, ComposeError> {
    let name = HeaderName::new_from_ascii(name.to_string())
        .map_err(|_| ComposeError::Header(name.to_string()))?;
    if value.contains(['\r', '\n']) {
        return Err(ComposeError::Header(name.to_string()));
    }
    Ok(HeaderValue::new(name, value.to_string()))
}

/// Builds the message on a blocking thread: with thousands of recipients composing takes
/// long enough to stall the async threads that answer requests (and `/healthz`).
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is one independent input of the message"
)]
pub async fn compose(
    content: Content,
    bisect: i64,
    event: Event,
    recipients: Recipients,
    settings: std::sync::Arc<MailSettings>,
    options: MailOptions,
    extras: Extras,
    message_id: String,
    date: SystemTime,
) -> Result<Composed, ComposeError> {
    tokio::task::spawn_blocking(move || {
        compose_now(
            &content,
            bisect,
            event,
            &recipients,
            &settings,
            &options,
            &extras,
            &message_id,
            date,
        )
    })
    .await
    .map_err(|e| ComposeError::Panicked(e.to_string()))?
}

/// Builds the message here and now (blocking; see `compose`). `recipients` may be empty
/// for a preview (the To header is left out). Linear in the number of recipients: each
/// address header is built once from the whole list (lettre's `to()` per address re-parses
/// the header it extends, which made 10,000 recipients quadratic).
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is one independent input of the message"
)]
pub fn compose_now(
    content: &Content,
    bisect: i64,
    event: Event,
    recipients: &Recipients,
    settings: &MailSettings,
    options: &MailOptions,
    extras: &Extras,
    message_id: &str,
    date: SystemTime,
) -> Result<Composed, ComposeError> {
    let mut b = lettre::Message::builder()
        .from(settings.from.clone())
        .subject(content.subject.clone())
        .date(date)
        .message_id(Some(message_id.to_string()));
    let reply_to = match &options.reply_to {
        Some(r) => Some(
            r.parse::<Mailbox>()
                .map_err(|_| ComposeError::Mailbox(r.clone()))?,
        ),
        None => settings.reply_to.clone(),
    };
    if let Some(r) = reply_to {
        b = b.reply_to(r);
    }
    let references: Vec<&str> = options
        .in_reply_to
        .iter()
        .chain(&extras.thread_root)
        .map(String::as_str)
        .filter(|id| *id != message_id)
        .collect();
    if let Some(parent) = references.last() {
        b = b
            .in_reply_to(parent.to_string())
            .references(references.join(" "));
    }
    if !recipients.to.is_empty() {
        let to: Mailboxes = recipients.to.iter().cloned().collect();
        b = b.mailbox(lettre::message::header::To::from(to));
    }
    if !recipients.cc.is_empty() {
        let cc: Mailboxes = recipients.cc.iter().cloned().collect();
        b = b.mailbox(lettre::message::header::Cc::from(cc));
    }
    // Bcc recipients are only in the envelope.
    // Robots' mail should not trigger vacation replies (RFC 3834).
    b = b.raw_header(raw_header("Auto-Submitted", "auto-generated")?);
    b = b.raw_header(raw_header("X-Perfbisect-Bisect", &bisect.to_string())?);
    b = b.raw_header(raw_header("X-Perfbisect-Event", event.as_str())?);
    for (name, value) in settings.headers.iter().chain(&options.headers) {
        b = b.raw_header(raw_header(name, value)?);
    }
    let envelope_from = settings.from.email.clone();
    let to: Vec<lettre::Address> = recipients.envelope().map(|m| m.email.clone()).collect();
    // A preview without recipients still needs an envelope to build; it is never sent.
    let envelope_to = if to.is_empty() {
        vec![envelope_from.clone()]
    } else {
        to.clone()
    };
    b = b.envelope(lettre::address::Envelope::new(
        Some(envelope_from.clone()),
        envelope_to,
    )?);
    let text = text_part(&content.text, ContentType::TEXT_PLAIN, None)?;
    let alternative = settings.html.then(|| {
        MultiPart::alternative()
            .singlepart(text.clone())
            .singlepart(
                text_part(&content.html, ContentType::TEXT_HTML, None)
                    .expect("the HTML report has short lines"),
            )
    });
    let message = if extras.attachments.is_empty() {
        match alternative {
            Some(alt) => b.multipart(alt)?,
            // A lone text part is the message body itself: no multipart wrapper at all.
            None => b.singlepart(text)?,
        }
    } else {
        // The body first, then each material, as LKP attaches its job file and config.
        let mut mixed = match alternative {
            Some(alt) => MultiPart::mixed().multipart(alt),
            None => MultiPart::mixed().singlepart(text),
        };
        for a in &extras.attachments {
            mixed = mixed.singlepart(text_part(
                &a.text,
                ContentType::TEXT_PLAIN,
                Some(&a.filename),
            )?);
        }
        b.multipart(mixed)?
    };
    Ok(Composed {
        message_id: message_id.to_string(),
        subject: content.subject.clone(),
        envelope_from: envelope_from.to_string(),
        recipients: to.iter().map(|a| a.to_string()).collect(),
        raw: message.formatted(),
    })
}

#[cfg(test)]
mod off_runtime_tests {
    use super::*;

    /// `compose` must not run on the async thread that awaits it. Run inline, a composition
    /// finishes within its first poll; handed to a blocking thread, the first poll only
    /// starts it and returns pending (2000 recipients take milliseconds to compose, the
    /// first poll follows the hand-over at once). An earlier form counted polls of another
    /// branch of a biased `select!` and lost the race when the blocking thread finished
    /// before the runtime polled again (seen once in CI under load).
    #[tokio::test(flavor = "current_thread")]
    async fn composing_runs_on_a_blocking_thread() {
        let addrs: Vec<String> = (0..2000).map(|i| format!("p{i}@example.org")).collect();
        let rcpt = Recipients::assemble(addrs.iter().map(String::as_str), [], []);
        let content = Content {
            subject: "s".into(),
            text: "t\n".into(),
            html: String::new(),
        };
        let caller = std::thread::current().id();
        let mut composing = std::pin::pin!(compose(
            content,
            1,
            Event::Found,
            rcpt,
            Default::default(),
            MailOptions::default(),
            Extras::default(),
            "<x@example.org>".into(),
            SystemTime::UNIX_EPOCH,
        ));
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(composing.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "composition ran on the async thread");
        let composed = composing.await.unwrap();
        assert_eq!(std::thread::current().id(), caller);
        assert_eq!(composed.recipients.len(), 2000);
    }
}
