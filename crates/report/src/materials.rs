//! "To reproduce", as LKP's reports end: where the job spec and kernel config are, the
//! command that runs the bisect again, and web links to the commits. Pure formatting; the
//! server gathers the facts.

/// The facts of the section.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Materials {
    /// Where the job spec as submitted can be fetched (also attached to the mail).
    pub job_url: String,
    /// Where the kernel config the job names can be fetched, if it names one.
    pub kconfig_url: Option<String>,
    /// The `perfbisect submit` command line that runs the same bisect again.
    pub submit_line: String,
    /// (label, web URL) of the commits the report names, when the repository has a web view.
    pub commit_links: Vec<(String, String)>,
}

/// The section's text, lines at most as wide as the command line needs.
pub fn text(m: &Materials) -> String {
    let mut t = String::from("\nThe job spec");
    if m.kconfig_url.is_some() {
        t += " and kernel config";
    }
    t += " to reproduce are available at:\n";
    t += &format!("{}\n", m.job_url);
    if let Some(k) = &m.kconfig_url {
        t += &format!("{k}\n");
    }
    t += "\nTo reproduce:\n\n";
    t += &format!(
        "        {}    # job file is attached in this email\n",
        m.submit_line
    );
    if !m.commit_links.is_empty() {
        t += "\n";
        let width = m
            .commit_links
            .iter()
            .map(|(l, _)| l.len())
            .max()
            .unwrap_or(0);
        for (label, url) in &m.commit_links {
            t += &format!("{label:<width$}  {url}\n");
        }
    }
    t
}

/// `report` with the section inserted before its signature (`-- ` line), or at the end.
pub fn insert(report: &str, m: &Materials) -> String {
    let section = text(m);
    match report.rfind("\n-- \n") {
        Some(at) => format!(
            "{}\n{}{}",
            &report[..at],
            section.trim_end_matches('\n'),
            &report[at..]
        ),
        None => format!("{report}{section}"),
    }
}

/// A commit's web URL from a template with `{sha}`.
pub fn commit_url(template: &str, sha: &str) -> String {
    template.replace("{sha}", sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Materials {
        Materials {
            job_url: "https://pb.example/api/v1/bisects/7/job.yaml".into(),
            kconfig_url: Some("https://pb.example/api/v1/kconfigs/x86_64-rhel-9.4".into()),
            submit_line:
                "perfbisect submit --repo linux --good a --bad b --job job.yaml --metric m".into(),
            commit_links: vec![
                ("culprit".into(), "https://git.example/commit/?id=c".into()),
                ("parent".into(), "https://git.example/commit/?id=p".into()),
            ],
        }
    }

    #[test]
    fn the_section_goes_before_the_signature() {
        let r = insert("Hello,\n\nbody\n\n-- \nrobot\n", &m());
        let (body, sig) = r.split_once("\n-- \n").unwrap();
        assert_eq!(sig, "robot\n");
        assert!(body.contains(
            "The job spec and kernel config to reproduce are available at:\nhttps://pb.example/api/v1/bisects/7/job.yaml\n"
        ), "{r}");
        assert!(
            body.contains("\n        perfbisect submit --repo linux"),
            "{r}"
        );
        assert!(
            body.ends_with("parent   https://git.example/commit/?id=p"),
            "{r}"
        );
        assert_eq!(
            insert("no signature\n", &Materials::default())
                .lines()
                .next(),
            Some("no signature")
        );
        assert_eq!(
            commit_url("https://github.com/o/r/commit/{sha}", "abc"),
            "https://github.com/o/r/commit/abc"
        );
    }
}
