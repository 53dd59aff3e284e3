//! The sender loop: claim a due outbox row, freeze its message on the first attempt, hand
//! it to the SMTP server, record the result. Retries back off exponentially; the last
//! failure marks the row failed (shown by `GET /api/v1/outbox`).
//!
//! Each claimed row goes through `deliver`, whose steps are ordered so that a crash at
//! any point loses nothing: until `mark_sent` commits, the row is `sending` under a
//! lease and another sender (or this one, restarted) takes it again when the lease ends.

use super::compose::{self, MailOptions};
use super::outbox::{self, Claimed, Frozen};
use super::{Event, MailSettings, Security, SmtpSettings, backoff, recipients};
use crate::report_input::{self, ReportContext, ReportInputError};
use crate::state::AppState;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use std::future::Future;
use std::time::{Duration, SystemTime};

/// Polling interval when no notification arrives (the fallback should LISTEN miss one).
const POLL: Duration = Duration::from_secs(5);

/// Why an attempt failed, and whether trying again can help.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub permanent: bool,
    pub message: String,
}

/// Something that delivers a message: SMTP in production, a fake in unit tests.
pub trait Transport: Send + Sync {
    fn send(
        &self,
        from: &str,
        to: &[String],
        raw: &[u8],
    ) -> impl Future<Output = Result<(), SendError>> + Send;
}

/// SMTP through lettre, bounded by the configured timeout.
pub struct Smtp {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SmtpSetupError {
    #[error("the SMTP CA certificate: {0}")]
    Certificate(lettre::transport::smtp::Error),
    #[error("TLS parameters for {host}: {source}")]
    Tls {
        host: String,
        source: lettre::transport::smtp::Error,
    },
}

impl Smtp {
    pub fn new(s: &SmtpSettings) -> Result<Smtp, SmtpSetupError> {
        let tls = || -> Result<TlsParameters, SmtpSetupError> {
            let mut params = TlsParameters::builder(s.host.clone());
            if let Some(pem) = &s.ca_pem {
                params = params.add_root_certificate(
                    Certificate::from_pem(pem).map_err(SmtpSetupError::Certificate)?,
                );
            }
            params.build_rustls().map_err(|source| SmtpSetupError::Tls {
                host: s.host.clone(),
                source,
            })
        };
        let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(s.host.clone())
            .port(s.port)
            .timeout(Some(s.timeout));
        b = match s.security {
            Security::Plain => b.tls(Tls::None),
            Security::StartTls => b.tls(Tls::Required(tls()?)),
            Security::Tls => b.tls(Tls::Wrapper(tls()?)),
        };
        if let Some((user, password)) = &s.credentials {
            b = b.credentials(Credentials::new(user.clone(), password.clone()));
        }
        Ok(Smtp {
            transport: b.build(),
            timeout: s.timeout,
        })
    }
}

impl Transport for Smtp {
    async fn send(&self, from: &str, to: &[String], raw: &[u8]) -> Result<(), SendError> {
        let parse = |a: &str| {
            a.parse::<lettre::Address>().map_err(|e| SendError {
                permanent: true,
                message: format!("address `{a}`: {e}"),
            })
        };
        let to = to.iter().map(|a| parse(a)).collect::<Result<Vec<_>, _>>()?;
        let envelope =
            lettre::address::Envelope::new(Some(parse(from)?), to).map_err(|e| SendError {
                permanent: true,
                message: format!("envelope: {e}"),
            })?;
        match tokio::time::timeout(self.timeout, self.transport.send_raw(&envelope, raw)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(SendError {
                permanent: e.is_permanent(),
                message: e.to_string(),
            }),
            Err(_) => Err(SendError {
                permanent: false,
                message: format!("no answer within {:?}", self.timeout),
            }),
        }
    }
}

/// What happened to one claimed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    Retrying,
    Failed,
    Skipped,
    /// Our lease ended and another sender holds the row: nothing recorded.
    Lost,
}

/// Renders and freezes the message of a claimed row; `Err` says why there is none.
async fn freeze(
    state: &AppState,
    settings: &MailSettings,
    c: &Claimed,
) -> Result<Result<Frozen, String>, anyhow::Error> {
    let Some(event) = Event::parse(&c.event) else {
        return Ok(Err(format!("unknown event `{}`", c.event)));
    };
    if !settings.wants(event) {
        return Ok(Err(format!(
            "`{}` is not in PERFBISECT_MAIL_EVENTS",
            event.as_str()
        )));
    }
    let ctx = ReportContext {
        robot: settings.robot(),
        public_url: state.public_url.clone(),
    };
    // A report shows every commit with its subject: stored now if the submit's fill has
    // not (an error leaves the row for a later attempt).
    crate::details::ensure(state, c.bisect_id).await?;
    let mut conn = state.db.acquire().await?;
    let loaded = if event.is_progress() {
        report_input::load_running(&mut conn, c.bisect_id, &ctx).await
    } else {
        report_input::load(&mut conn, c.bisect_id, &ctx).await
    };
    drop(conn);
    let loaded = match loaded {
        Ok(l) => l,
        Err(ReportInputError::Db(e)) => return Err(e.into()),
        Err(e) => return Ok(Err(e.to_string())),
    };
    let rcpt = recipients::resolve(&state.db, &state.mirrors, settings, &loaded, event).await?;
    if rcpt.is_empty() {
        return Ok(Err(
            "no recipients: no notify address, subscription or author".into(),
        ));
    }
    let mut content = match compose::content(&loaded, event, settings) {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("the report cannot be rendered: {e}"))),
    };
    compose::add_materials(
        &state.db,
        c.bisect_id,
        event,
        &state.public_url,
        &mut content,
    )
    .await?;
    let options = MailOptions::load(&state.db, c.bisect_id).await?;
    let extras = compose::extras(&state.db, c.bisect_id, event, settings).await?;
    let composed = match compose::compose(
        content,
        c.bisect_id,
        event,
        rcpt,
        std::sync::Arc::new(settings.clone()),
        options,
        extras,
        compose::message_id(&c.message_key, settings),
        SystemTime::now(),
    )
    .await
    {
        Ok(m) => m,
        Err(e) => return Ok(Err(e.to_string())),
    };
    Ok(Ok(Frozen {
        message_id: composed.message_id,
        subject: composed.subject,
        envelope_from: composed.envelope_from,
        recipients: composed.recipients,
        raw: composed.raw,
    }))
}

/// One claimed row, from freezing to the recorded result.
pub async fn deliver(
    state: &AppState,
    settings: &MailSettings,
    transport: &impl Transport,
    c: &Claimed,
) -> anyhow::Result<Delivery> {
    let frozen = match c.frozen() {
        Some(f) => f,
        None => match freeze(state, settings, c).await? {
            Ok(f) => {
                if !outbox::freeze(&state.db, c, &f).await? {
                    return Ok(Delivery::Lost);
                }
                f
            }
            Err(why) => {
                tracing::warn!(mail = c.id, bisect = c.bisect_id, why, "mail not sent");
                return Ok(if outbox::mark_skipped(&state.db, c, &why).await? {
                    Delivery::Skipped
                } else {
                    Delivery::Lost
                });
            }
        },
    };
    let sent = transport
        .send(&frozen.envelope_from, &frozen.recipients, &frozen.raw)
        .await;
    // From here to the end of mark_sent is the window in which a crash re-sends the same
    // message (same bytes, same Message-ID) once the lease ends.
    let recorded = match &sent {
        Ok(()) => outbox::mark_sent(&state.db, c).await?,
        Err(e) => {
            let last = c.attempts >= settings.max_attempts;
            let retry_in =
                (!e.permanent && !last).then(|| backoff(settings.retry_base, c.attempts as u32));
            outbox::mark_attempt_failed(&state.db, c, &e.message, retry_in).await?
        }
    };
    let outcome = match (&sent, recorded) {
        (_, false) => Delivery::Lost,
        (Ok(()), true) => Delivery::Sent,
        (Err(e), true) if e.permanent || c.attempts >= settings.max_attempts => Delivery::Failed,
        (Err(_), true) => Delivery::Retrying,
    };
    match &sent {
        Ok(()) => {
            tracing::info!(mail = c.id, bisect = c.bisect_id, message_id = %frozen.message_id,
                                 recipients = frozen.recipients.len(), "mail sent")
        }
        Err(e) => tracing::warn!(mail = c.id, bisect = c.bisect_id, attempt = c.attempts,
                                 error = %e, ?outcome, "mail not delivered"),
    }
    Ok(outcome)
}

/// Sends every due row, one after another; returns how many were handled.
pub async fn drain(
    state: &AppState,
    settings: &MailSettings,
    transport: &impl Transport,
) -> anyhow::Result<usize> {
    outbox::give_up_abandoned(&state.db, settings.max_attempts).await?;
    let mut handled = 0;
    while let Some(c) = outbox::claim(&state.db, settings.lease).await? {
        deliver(state, settings, transport, &c).await?;
        handled += 1;
    }
    Ok(handled)
}

/// Runs the sender until the process ends. Without SMTP it does not run at all: mails
/// wait in the outbox as `pending`.
pub async fn run(state: AppState, settings: MailSettings, transport: Smtp) {
    let mut listener = match sqlx::postgres::PgListener::connect_with(&state.db).await {
        Ok(mut l) => match l.listen(outbox::CHANNEL).await {
            Ok(()) => Some(l),
            Err(e) => {
                tracing::warn!(error = %e, "outbox LISTEN; polling instead");
                None
            }
        },
        Err(e) => {
            tracing::warn!(error = %e, "outbox LISTEN; polling instead");
            None
        }
    };
    // Ends with the server: once the pool is closed every query fails at once, and a loop
    // that retried them without waiting kept a runtime thread busy, so the process never
    // exited on SIGTERM (it logged ~90,000 warnings in 20 s until killed).
    while !state.db.is_closed() {
        if settings.wants(Event::Started)
            && let Err(e) = outbox::enqueue_started(&state.db).await
        {
            tracing::warn!(error = %e, "queueing started mails");
        }
        if settings.wants(Event::Reproduced)
            && let Err(e) = outbox::enqueue_reproduced(&state.db).await
        {
            tracing::warn!(error = %e, "queueing reproduced mails");
        }
        if let Err(e) = drain(&state, &settings, &transport).await {
            tracing::warn!(error = ?e, "sending mail");
        }
        // Until the next retry falls due, at most POLL: a retry after 1 s is tried after
        // 1 s, not at the next poll. A listener whose connection is lost answers at once
        // with an error (it reconnects on the next call): wait out the nap then, as without
        // one.
        let nap = match outbox::next_due_in(&state.db).await {
            Ok(Some(secs)) => Duration::from_secs_f64(secs.clamp(0.25, POLL.as_secs_f64())),
            _ => POLL,
        };
        match listener.as_mut() {
            Some(l) => {
                if let Ok(Err(e)) = tokio::time::timeout(nap, l.recv()).await {
                    tracing::debug!(error = %e, "outbox listener");
                    tokio::time::sleep(nap).await;
                }
            }
            None => tokio::time::sleep(nap).await,
        }
    }
}

/// Starts the sender when SMTP is configured.
pub fn spawn(state: &AppState) -> anyhow::Result<()> {
    let settings = (*state.mail).clone();
    let Some(smtp) = &settings.smtp else {
        tracing::info!("no SMTP configured (PERFBISECT_SMTP_URL): mails wait in the outbox");
        return Ok(());
    };
    let transport = Smtp::new(smtp)?;
    tracing::info!(host = %smtp.host, port = smtp.port, security = ?smtp.security, "mail sender running");
    tokio::spawn(run(state.clone(), settings, transport));
    Ok(())
}
