//! Which repository URLs the server may fetch: a configurable policy, so that a token
//! holder cannot use the server's mirrors to reach into the network it sits in. A URL's
//! transport must be an allowed scheme (`file` covers local paths); a listed host
//! (`--repo-hosts`) is always allowed, and with a host list only listed hosts are; any
//! other host that names or resolves to a loopback, private, link-local, shared (CGNAT)
//! or unspecified address is refused unless `--repo-allow-private` says otherwise.
//! Checked before every fetch (registration, submission, watch polls), so a name that
//! later resolves elsewhere is caught again.

use std::net::{IpAddr, ToSocketAddrs};

/// The flags that set the policy (flattened into the server's configuration).
#[derive(Debug, Clone, clap::Args)]
pub struct UrlPolicyConfig {
    /// Transports repositories may use (comma-separated): `https`, `http`, `git`, `ssh`,
    /// `file` (local paths and `file://`), or any other git transport.
    #[arg(
        long = "repo-schemes",
        env = "PERFBISECT_REPO_SCHEMES",
        value_delimiter = ',',
        default_value = "https,http,git,ssh,file"
    )]
    pub schemes: Vec<String>,
    /// Hosts repositories may live on (comma-separated; `*.example.org` for a domain).
    /// Empty: any public host. A listed host is allowed even on a private address.
    #[arg(
        long = "repo-hosts",
        env = "PERFBISECT_REPO_HOSTS",
        value_delimiter = ','
    )]
    pub hosts: Vec<String>,
    /// Allow hosts on loopback, private and link-local addresses (a lab's own git server).
    #[arg(long = "repo-allow-private", env = "PERFBISECT_REPO_ALLOW_PRIVATE")]
    pub allow_private: bool,
}

impl Default for UrlPolicyConfig {
    fn default() -> Self {
        UrlPolicyConfig {
            schemes: ["https", "http", "git", "ssh", "file"]
                .map(String::from)
                .to_vec(),
            hosts: Vec::new(),
            allow_private: false,
        }
    }
}

/// Why a URL is refused; the message names the rule and the flag that changes it.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UrlRefused {
    #[error("`{url}` is not a URL or path git can fetch")]
    Unparsable { url: String },
    #[error("scheme `{scheme}` is not allowed (allowed: {allowed}; --repo-schemes)")]
    Scheme { scheme: String, allowed: String },
    #[error("host `{host}` is not in the allowed hosts ({allowed}; --repo-hosts)")]
    Host { host: String, allowed: String },
    #[error(
        "host `{host}` is on a {range} address ({addr}); private, loopback and link-local \
         addresses are refused unless allowed (--repo-allow-private, or name the host in --repo-hosts)"
    )]
    Private {
        host: String,
        addr: IpAddr,
        range: &'static str,
    },
}

/// A URL's transport and host, as git reads it.
#[derive(Debug, PartialEq)]
struct Target {
    scheme: String,
    host: Option<String>,
    port: u16,
}

fn default_port(scheme: &str) -> u16 {
    match scheme {
        "https" => 443,
        "http" => 80,
        "git" => 9418,
        _ => 22,
    }
}

/// Splits `url` the way git does: `transport::address` (a remote helper), `scheme://...`,
/// scp-like `[user@]host:path`, or a local path.
fn target(url: &str) -> Result<Target, UrlRefused> {
    let unparsable = || UrlRefused::Unparsable { url: url.into() };
    let colon = url.find(':');
    let slash = url.find('/');
    if let Some(i) = url.find("::")
        && url.find("://").is_none_or(|j| i < j)
    {
        return Ok(Target {
            scheme: url[..i].to_ascii_lowercase(),
            host: None,
            port: 0,
        });
    }
    if url.contains("://") {
        let parsed = url::Url::parse(url).map_err(|_| unparsable())?;
        let scheme = parsed.scheme().to_ascii_lowercase();
        let scheme = match scheme.as_str() {
            "git+ssh" | "ssh+git" => "ssh".to_string(),
            _ => scheme,
        };
        if scheme == "file" {
            return Ok(Target {
                scheme,
                host: None,
                port: 0,
            });
        }
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(unparsable)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = parsed.port().unwrap_or(default_port(&scheme));
        return Ok(Target {
            host: Some(host.to_ascii_lowercase()),
            scheme,
            port,
        });
    }
    // scp-like: a colon before any slash.
    if let Some(c) = colon
        && slash.is_none_or(|s| c < s)
    {
        let authority = &url[..c];
        let host = authority.rsplit('@').next().unwrap_or(authority);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(unparsable());
        }
        return Ok(Target {
            scheme: "ssh".into(),
            host: Some(host.to_ascii_lowercase()),
            port: 22,
        });
    }
    Ok(Target {
        scheme: "file".into(),
        host: None,
        port: 0,
    })
}

/// The kind of non-public range `ip` is in, if any.
pub fn private_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_private() {
                Some("private")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if o[0] == 100 && (64..128).contains(&o[1]) {
                Some("shared (CGNAT)")
            } else if v4.is_unspecified() || o[0] == 0 {
                Some("unspecified")
            } else if v4.is_broadcast() || v4.is_multicast() {
                Some("broadcast or multicast")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return private_range(IpAddr::V4(v4));
            }
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_unique_local() {
                Some("private")
            } else if v6.is_unicast_link_local() {
                Some("link-local")
            } else if v6.is_multicast() {
                Some("broadcast or multicast")
            } else {
                None
            }
        }
    }
}

fn host_listed(host: &str, hosts: &[String]) -> bool {
    hosts.iter().any(|h| {
        let h = h.trim().to_ascii_lowercase();
        match h.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => host == h,
        }
    })
}

/// The policy in force (`Mirrors` checks it before each fetch).
#[derive(Debug, Clone)]
pub struct UrlPolicy {
    config: UrlPolicyConfig,
}

impl Default for UrlPolicy {
    fn default() -> Self {
        UrlPolicy::new(UrlPolicyConfig::default())
    }
}

impl UrlPolicy {
    pub fn new(mut config: UrlPolicyConfig) -> Self {
        for s in &mut config.schemes {
            *s = s.trim().to_ascii_lowercase();
        }
        config.hosts.retain(|h| !h.trim().is_empty());
        UrlPolicy { config }
    }

    /// The default policy with private addresses allowed: for a lab (and tests) whose
    /// git servers are on loopback or a private network.
    pub fn allowing_private() -> Self {
        UrlPolicy::new(UrlPolicyConfig {
            allow_private: true,
            ..Default::default()
        })
    }

    /// Checks `url`; may resolve its host name (blocking: call off the async threads).
    pub fn check(&self, url: &str) -> Result<(), UrlRefused> {
        let t = target(url.trim())?;
        if !self.config.schemes.contains(&t.scheme) {
            return Err(UrlRefused::Scheme {
                scheme: t.scheme,
                allowed: self.config.schemes.join(", "),
            });
        }
        let Some(host) = t.host else {
            return Ok(());
        };
        if host_listed(&host, &self.config.hosts) {
            return Ok(());
        }
        if !self.config.hosts.is_empty() {
            return Err(UrlRefused::Host {
                host,
                allowed: self.config.hosts.join(", "),
            });
        }
        if self.config.allow_private {
            return Ok(());
        }
        let addrs: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            // A name that does not resolve is left to the fetch, which says so itself.
            Err(_) => (host.as_str(), t.port)
                .to_socket_addrs()
                .map(|it| it.map(|a| a.ip()).collect())
                .unwrap_or_default(),
        };
        for addr in addrs {
            if let Some(range) = private_range(addr) {
                return Err(UrlRefused::Private { host, addr, range });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_urls_the_way_git_does() {
        let t = target("https://user@git.example.org:8443/linux.git").unwrap();
        assert_eq!(
            (t.scheme.as_str(), t.host.as_deref(), t.port),
            ("https", Some("git.example.org"), 8443)
        );
        let t = target("git@github.com:o/r.git").unwrap();
        assert_eq!(
            (t.scheme.as_str(), t.host.as_deref()),
            ("ssh", Some("github.com"))
        );
        assert_eq!(target("/srv/repos/linux.git").unwrap().scheme, "file");
        assert_eq!(target("./here").unwrap().scheme, "file");
        assert_eq!(target("file:///srv/x.git").unwrap().scheme, "file");
        assert_eq!(target("ext::sh -c id").unwrap().scheme, "ext");
        assert_eq!(
            target("http://[::1]:80/x").unwrap().host.as_deref(),
            Some("::1")
        );
    }

    #[test]
    fn refuses_private_ranges_unless_allowed() {
        let p = UrlPolicy::default();
        for url in [
            "git://127.0.0.1:9418/x.git",
            "https://10.1.2.3/x.git",
            "http://169.254.169.254/latest",
            "ssh://root@192.168.1.1/x",
            "root@172.16.0.9:x.git",
            "http://[::1]/x",
            "http://[fd00::1]/x",
            "http://[::ffff:127.0.0.1]/x",
            "http://100.64.0.1/x",
            "http://0.0.0.0/x",
            "https://localhost/x",
        ] {
            let e = p.check(url).unwrap_err();
            assert!(matches!(e, UrlRefused::Private { .. }), "{url}: {e}");
            assert!(e.to_string().contains("--repo-allow-private"), "{e}");
        }
        assert_eq!(p.check("https://93.184.216.34/x.git"), Ok(()));
        assert_eq!(p.check("/srv/repos/x.git"), Ok(()));
        let open = UrlPolicy::allowing_private();
        assert_eq!(open.check("git://127.0.0.1:9418/x.git"), Ok(()));
    }

    #[test]
    fn schemes_and_hosts_are_configurable() {
        let p = UrlPolicy::new(UrlPolicyConfig {
            schemes: vec!["https".into()],
            hosts: vec![
                "git.lab.example".into(),
                "*.kernel.org".into(),
                "10.0.0.7".into(),
            ],
            allow_private: false,
        });
        assert_eq!(p.check("https://git.kernel.org/x.git"), Ok(()));
        assert_eq!(p.check("https://git.lab.example/x.git"), Ok(()));
        // A listed host is allowed even on a private address.
        assert_eq!(p.check("https://10.0.0.7/x.git"), Ok(()));
        assert!(matches!(
            p.check("https://github.com/o/r"),
            Err(UrlRefused::Host { .. })
        ));
        assert!(matches!(
            p.check("/srv/x.git"),
            Err(UrlRefused::Scheme { .. })
        ));
        assert!(matches!(
            p.check("ext::sh -c id"),
            Err(UrlRefused::Scheme { .. })
        ));
        assert!(matches!(
            p.check("git://git.kernel.org/x"),
            Err(UrlRefused::Scheme { .. })
        ));
    }
}
