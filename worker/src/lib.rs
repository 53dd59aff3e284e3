//! The perfbisect worker: the agent on (or next to) a test host.
//!
//! It registers with the server, then loops: claim a task (long poll) → check the commit out
//! from its own mirror → build it (cached by commit and build recipe) → run the benchmark
//! the task's number of times → parse and upload every run → complete the task. A heartbeat
//! renews the lease throughout and carries cancellation back.
//!
//! Architecture invariant: the worker keeps no job state that matters; the server holds it,
//! so a worker (or host) that dies loses nothing but the task's lease.

pub mod agent;
pub mod build;
pub mod cache;
pub mod checkout;
pub mod client;
pub mod conceal;
pub mod config;
pub mod deploy;
pub mod exec;
pub mod guest;
pub mod initramfs;
pub mod machine;
pub mod note;
pub mod power;
pub mod sanitize;
pub mod task;
pub mod tls;

pub use agent::run;
pub use config::WorkerConfig;
