//! The command recipe: check the commit out into its cache entry and run `build.command`
//! there. The tree, built, is the artifact: the run command runs in it.

use super::{BuildError, Builder};
use crate::exec::{self, Output};
use perfbisect_wire::worker::TaskAssignment;
use std::time::Duration;
use tokio::sync::watch;

pub async fn build(
    builder: &Builder,
    task: &TaskAssignment,
    sha: &str,
    env: &[(String, String)],
    cancel: &mut watch::Receiver<bool>,
) -> Result<Output, BuildError> {
    let job = &task.job;
    let dir = builder.cache.begin(sha, &job.build_hash())?;
    let (ws, url, sha_owned, target) = (
        builder.workspace.clone(),
        task.repository_url.clone(),
        sha.to_string(),
        dir.clone(),
    );
    tokio::task::spawn_blocking(move || ws.checkout_into(&url, &sha_owned, &target))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
    let mut env = env.to_vec();
    if let Some(cc) = &job.compiler {
        env.push(("CC".into(), cc.clone()));
    }
    let command = job
        .build_command()
        .expect("validated: a command recipe has a command");
    Ok(exec::shell(
        command,
        &dir,
        &env,
        Duration::from_secs(job.timeouts.build_secs),
        cancel,
    )
    .await?)
}
