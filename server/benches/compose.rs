//! What composing one mail costs as its recipient lists grow: prints the time to compose a
//! report mail for 100, 1,000 and 10,000 recipients (To, Cc and Bcc mixed as subscriptions
//! and trailers make them). Linear growth means ten times the recipients costs about ten
//! times the time. `cargo bench -p perfbisect-server --bench compose`.

use perfbisect_server::notify::compose::{self, Content, Extras, MailOptions};
use perfbisect_server::notify::recipients::Recipients;
use perfbisect_server::notify::{Event, MailSettings};
use std::time::{Instant, SystemTime};

fn main() {
    let settings = MailSettings::default();
    let content = Content {
        subject: "[ext4] 0123456789: fio.write_iops 54.8% improvement".into(),
        text: "the report\n".repeat(200),
        html: String::new(),
    };
    let options = MailOptions::default();
    let extras = Extras::default();
    println!(
        "{:>10}  {:>12}  {:>14}  {:>10}",
        "recipients", "compose ms", "µs/recipient", "bytes"
    );
    for n in [100usize, 1_000, 10_000] {
        let addrs: Vec<String> = (0..n)
            .map(|i| format!("Person {i} <p{i}@example.org>"))
            .collect();
        let (to, rest) = addrs.split_at(n / 10);
        let (cc, bcc) = rest.split_at(rest.len() / 2);
        let rcpt = Recipients::assemble(
            to.iter().map(String::as_str),
            cc.iter().map(String::as_str),
            bcc.iter().map(String::as_str),
        );
        // The best of three, so one scheduling hiccup does not decide the figure.
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let m = compose::compose_now(
                &content,
                1,
                Event::Found,
                &rcpt,
                &settings,
                &options,
                &extras,
                "<perfbisect.1.found@example.org>",
                SystemTime::UNIX_EPOCH,
            )
            .unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            bytes = m.raw.len();
            assert_eq!(m.recipients.len(), n);
        }
        println!(
            "{n:>10}  {:>12.1}  {:>14.2}  {bytes:>10}",
            best * 1e3,
            best * 1e6 / n as f64
        );
    }
}
