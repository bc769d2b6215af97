//! Where a webhook may be delivered. An owner types the URL, and the server then makes
//! requests to it: without a guard, that reaches whatever the server's network reaches
//! (a server-side request forgery: a metadata service, an admin port, Redis). So a
//! receiver must be an http or https URL whose host is, and resolves only to, public
//! addresses, unless the operator allows private ones (`RATEKEEPER_WEBHOOK_ALLOW_PRIVATE`,
//! for tests and private networks). A name is checked on every address it resolves to,
//! when the webhook is made and again at each delivery (it may resolve elsewhere later).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::{Host, Url};

/// The longest URL accepted.
const URL_MAX: usize = 2048;

/// Why a receiver's URL is refused, in words for the owner who typed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiverRefused {
    #[error("must be an absolute http or https URL")]
    NotHttp,
    #[error("must be at most {URL_MAX} characters")]
    TooLong,
    #[error("must not hold a user name or password (put credentials in the path or query)")]
    Credentials,
    #[error(
        "{host} is {address}, a {kind} address: webhooks are only sent to public addresses \
         unless the operator sets RATEKEEPER_WEBHOOK_ALLOW_PRIVATE=true"
    )]
    NotPublic {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
    #[error("{host} could not be resolved: {why}")]
    Unresolved { host: String, why: String },
}

/// The URL as typed, parsed, if it can be a receiver at all (before any address check).
pub fn parse_receiver(text: &str) -> Result<Url, ReceiverRefused> {
    let text = text.trim();
    if text.len() > URL_MAX {
        return Err(ReceiverRefused::TooLong);
    }
    let url = Url::parse(text).map_err(|_| ReceiverRefused::NotHttp)?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(ReceiverRefused::NotHttp);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ReceiverRefused::Credentials);
    }
    Ok(url)
}

/// The addresses to deliver to at `url`: each one it resolves to, all of them public
/// unless `allow_private`.
pub async fn receiver_addresses(
    url: &Url,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, ReceiverRefused> {
    let port = url.port_or_known_default().unwrap_or(443);
    let host_text = url.host_str().unwrap_or_default().to_owned();
    let addresses: Vec<SocketAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
        Some(Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| ReceiverRefused::Unresolved {
                host: host_text.clone(),
                why: e.to_string(),
            })?
            .collect(),
        None => return Err(ReceiverRefused::NotHttp),
    };
    if addresses.is_empty() {
        return Err(ReceiverRefused::Unresolved {
            host: host_text,
            why: "no address".to_owned(),
        });
    }
    if !allow_private {
        for address in &addresses {
            if let Some(kind) = not_public(address.ip()) {
                return Err(ReceiverRefused::NotPublic {
                    host: host_text,
                    address: address.ip(),
                    kind,
                });
            }
        }
    }
    Ok(addresses)
}

/// What kind of non-public address `ip` is; `None` for a public one.
pub fn not_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => not_public_v4(v4),
        IpAddr::V6(v6) => not_public_v6(v6),
    }
}

fn not_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let kind = match (a, b, c) {
        (0, _, _) => "\"this network\"",
        (127, _, _) => "loopback",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "private",
        (100, 64..=127, _) => "shared (carrier-grade NAT)",
        (169, 254, _) => "link-local",
        (192, 0, 0) => "protocol-assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    };
    Some(kind)
}

fn not_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return not_public_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach the IPv4 address they embed.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return not_public_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    if s[0] == 0x2002 {
        return not_public_v4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    let kind = if ip.is_unspecified() {
        "unspecified"
    } else if ip.is_loopback() {
        "loopback"
    } else if s[0] & 0xfe00 == 0xfc00 {
        "unique local (private)"
    } else if s[0] & 0xffc0 == 0xfe80 {
        "link-local"
    } else if s[0] & 0xff00 == 0xff00 {
        "multicast"
    } else if s[0] == 0x2001 && s[1] == 0xdb8 {
        "documentation"
    } else if s[..4] == [0x100, 0, 0, 0] {
        "discard-only"
    } else if s[..6] == [0, 0, 0, 0, 0, 0] {
        // ::a.b.c.d, the deprecated IPv4-compatible form.
        "IPv4-compatible"
    } else {
        return None;
    };
    Some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_pass() {
        let refused = [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "2001:db8::1",
        ];
        for ip in refused {
            assert!(not_public(ip.parse().unwrap()).is_some(), "{ip} passed");
        }
        let public = [
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ];
        for ip in public {
            assert_eq!(not_public(ip.parse().unwrap()), None, "{ip} refused");
        }
    }

    #[test]
    fn a_url_that_cannot_be_a_receiver_is_refused_saying_why() {
        for text in [
            "ftp://example.com/x",
            "example.com/x",
            "http://",
            "file:///etc/passwd",
        ] {
            assert_eq!(
                parse_receiver(text),
                Err(ReceiverRefused::NotHttp),
                "{text}"
            );
        }
        assert_eq!(
            parse_receiver("https://user:secret@example.com/x"),
            Err(ReceiverRefused::Credentials)
        );
        let long = format!("https://example.com/{}", "a".repeat(URL_MAX));
        assert_eq!(parse_receiver(&long), Err(ReceiverRefused::TooLong));
        assert!(parse_receiver(" https://hooks.example.com/ratekeeper?x=1 ").is_ok());
    }

    #[tokio::test]
    async fn a_private_receiver_is_refused_unless_allowed() {
        for text in [
            "http://127.0.0.1:9/hook",
            "http://localhost:9/hook",
            "http://[::1]/hook",
            "http://10.0.0.1/hook",
            "http://169.254.169.254/latest/meta-data",
        ] {
            let url = parse_receiver(text).unwrap();
            let refused = receiver_addresses(&url, false).await.unwrap_err();
            assert!(
                matches!(refused, ReceiverRefused::NotPublic { .. }),
                "{text}: {refused:?}"
            );
            assert!(
                refused
                    .to_string()
                    .contains("RATEKEEPER_WEBHOOK_ALLOW_PRIVATE")
            );
            assert!(
                receiver_addresses(&url, true).await.is_ok(),
                "{text} allowed"
            );
        }
        let public = parse_receiver("https://93.184.216.34/hook").unwrap();
        assert_eq!(
            receiver_addresses(&public, false).await.unwrap(),
            vec!["93.184.216.34:443".parse().unwrap()]
        );
    }
}
