//! The worker's secrets out of `/proc/<worker>/environ` and `cmdline` before anything runs
//! (`perfbisect_conceal` says how): the enrollment token, given as `--enroll-token` or
//! `PERFBISECT_ENROLL_TOKEN`.
//!
//! What this does not do: a job running as the worker's user can still read the worker's
//! files (`<work-dir>/worker-token`, `--enroll-token-file`) and, as root, its memory. Labs
//! whose benchmarks are not trusted run the worker as its own unprivileged user, so a job's
//! root, if it needs one, is the test host's (ssh, qemu), not the worker's.

use perfbisect_conceal::Secret;

const ENROLL_TOKEN: Secret = Secret {
    flag: "--enroll-token",
    var: "PERFBISECT_ENROLL_TOKEN",
};

/// Call first in the worker: returns the enrollment token when it was handed over by the
/// worker's previous image; executes the worker again without it (and does not return) when
/// it sits in the environment or the arguments; `None` otherwise.
pub fn conceal(token: Option<&str>) -> anyhow::Result<Option<String>> {
    let mut values = perfbisect_conceal::conceal(&[(ENROLL_TOKEN, token)])?;
    Ok(values.remove(ENROLL_TOKEN.flag))
}
