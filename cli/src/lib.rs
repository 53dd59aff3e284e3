//! The `perfbisect` command's library half: the REST client, the example repository
//! generator (used by the demo and the end-to-end tests), and the demo itself.

pub mod api;
pub mod demo;
pub mod example;
pub mod findings;
pub mod loadtest;
mod loadtest_faults;
mod loadtest_reads;
pub mod metrics_check;
pub mod processes;
pub mod watch_example;
pub mod watches;
