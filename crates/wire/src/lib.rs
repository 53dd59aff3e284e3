//! The vocabulary that the server, the workers and the CLI share: request and response
//! bodies of the REST API, and the job spec with its canonical hash.
//!
//! Architecture invariant: this crate does no I/O; it only describes data and validates it.

pub mod api;
pub mod findings;
pub mod hosts;
pub mod job;
pub mod states;
pub mod tasks;
pub mod text;
pub mod watch;
pub mod worker;

pub use job::{BuildKind, DeployKind, JobSpec, JobSpecError};
