//! Mail about bisects: a transactional outbox in PostgreSQL and a sender loop over SMTP.
//!
//! - `outbox`: the table's operations. A final status and its mail row are written in one
//!   transaction (`enqueue`, called by `scheduler::finish`); senders claim rows with
//!   `FOR UPDATE SKIP LOCKED` and a lease, so replicas never send the same row at once.
//! - `compose`: renders the report and builds the MIME message (text/plain in 7bit or
//!   8bit with the job spec and kconfig attached; HTML only when configured), threaded.
//! - `recipients`: who gets what (submitter, subscribers, optionally the culprit's author
//!   and its trailers).
//! - `sender`: the loop: freeze the message once, send it, retry with exponential backoff,
//!   mark it failed after the last attempt (visible in the API, never dropped).
//! - `config`: the flags.
//!
//! Delivery is at least once. The message (bytes, Message-ID, Date) is frozen in its row
//! before the first attempt, so a crash between the SMTP server's acceptance and the row's
//! `sent` mark re-sends the identical message, whose Message-ID lets receivers drop the
//! copy. The window is one UPDATE long.

pub mod compose;
pub mod config;
pub use crate::store::outbox;
pub mod recipients;
pub mod sender;

pub use config::MailConfig;

use lettre::message::Mailbox;
use perfbisect_report::ReportConfig;
use std::time::Duration;

/// What a mail is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    /// The bisect began (opt-in).
    Started,
    /// The endpoints reproduced the change and the search began: a progress mail (opt-in),
    /// in the thread of `started`. A long kernel bisect's subscribers learn early that it
    /// is real, how large, and what finishing it is predicted to cost.
    Reproduced,
    Found,
    NotReproduced,
    Inconclusive,
    Failed,
}

impl Event {
    pub const ALL: [Event; 6] = [
        Event::Started,
        Event::Reproduced,
        Event::Found,
        Event::NotReproduced,
        Event::Inconclusive,
        Event::Failed,
    ];
    /// Mailed unless configured otherwise; `started` and `reproduced` are opt-in.
    pub const DEFAULT: [Event; 4] = [
        Event::Found,
        Event::NotReproduced,
        Event::Inconclusive,
        Event::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Event::Started => "started",
            Event::Reproduced => "reproduced",
            Event::Found => "found",
            Event::NotReproduced => "not_reproduced",
            Event::Inconclusive => "inconclusive",
            Event::Failed => "failed",
        }
    }

    /// A mail sent while the bisect runs (no report yet), as opposed to one of its outcome.
    pub fn is_progress(self) -> bool {
        matches!(self, Event::Started | Event::Reproduced)
    }

    pub fn parse(s: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// The event a final bisect status is mailed as; `cancelled` is not mailed (the user
    /// who cancelled knows).
    pub fn of_final_status(status: &str) -> Option<Event> {
        match status {
            "found" | "not_reproduced" | "inconclusive" | "failed" => Event::parse(status),
            _ => None,
        }
    }
}

/// How to reach the SMTP server.
#[derive(Debug, Clone)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub credentials: Option<(String, String)>,
    /// An extra trusted root certificate (PEM) for a relay with a private CA.
    pub ca_pem: Option<Vec<u8>>,
    /// Bound on one whole delivery attempt (connect, TLS, every command).
    pub timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// `smtp://`: no TLS.
    Plain,
    /// `smtp+starttls://`: STARTTLS required.
    StartTls,
    /// `smtps://`: TLS from the first byte.
    Tls,
}

/// Mail settings in effect, shared by the API (previews) and the sender.
#[derive(Debug, Clone)]
pub struct MailSettings {
    /// `None`: mails stay `pending` in the outbox until a server with SMTP picks them up.
    pub smtp: Option<SmtpSettings>,
    pub from: Mailbox,
    pub reply_to: Option<Mailbox>,
    /// Added to every mail, e.g. `X-Patchwork-Hint: ignore`.
    pub headers: Vec<(String, String)>,
    pub events: Vec<Event>,
    /// Mail the culprit's author (found only).
    pub culprit_author: bool,
    /// Copy the culprit's `Signed-off-by:` and `Cc:` trailers (found only).
    pub trailers: bool,
    pub max_attempts: i32,
    /// Delay before the first retry; doubles with every attempt, up to `MAX_RETRY_DELAY`.
    pub retry_base: Duration,
    /// How long a sender holds a claimed row; longer than a whole attempt may take.
    pub lease: Duration,
    pub report: ReportConfig,
    pub robot_name: String,
    /// Send an HTML alternative besides the text (`PERFBISECT_MAIL_HTML`); off by default.
    pub html: bool,
}

/// Retries are spaced at most this far apart.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

impl Default for MailSettings {
    fn default() -> Self {
        MailConfig::default()
            .settings()
            .expect("the default mail configuration is valid")
    }
}

impl MailSettings {
    /// The domain of Message-IDs: the From address's.
    pub fn message_id_domain(&self) -> &str {
        self.from.email.domain()
    }

    pub fn robot(&self) -> perfbisect_report::Robot {
        perfbisect_report::Robot {
            name: self.robot_name.clone(),
            email: Some(self.from.email.to_string()),
        }
    }

    pub fn wants(&self, event: Event) -> bool {
        self.events.contains(&event)
    }
}

/// The delay before retry number `attempt` (1 = the first retry): `base · 2^(attempt−1)`,
/// at most [`MAX_RETRY_DELAY`].
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(30));
    base.saturating_mul(factor).min(MAX_RETRY_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let base = Duration::from_secs(30);
        assert_eq!(backoff(base, 1), Duration::from_secs(30));
        assert_eq!(backoff(base, 2), Duration::from_secs(60));
        assert_eq!(backoff(base, 4), Duration::from_secs(240));
        assert_eq!(backoff(base, 8), MAX_RETRY_DELAY);
        assert_eq!(backoff(base, 1000), MAX_RETRY_DELAY);
    }

    #[test]
    fn events_round_trip_and_cancelled_is_not_mailed() {
        for e in Event::ALL {
            assert_eq!(Event::parse(e.as_str()), Some(e));
        }
        assert_eq!(Event::of_final_status("found"), Some(Event::Found));
        assert_eq!(Event::of_final_status("cancelled"), None);
        assert_eq!(Event::of_final_status("searching"), None);
    }
}
