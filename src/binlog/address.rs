//! A peer's address as a binary log `Address` (grpc-go `addrToProto`).

use std::net::{IpAddr, SocketAddr};

use super::proto::Address;
use super::proto::address::Type;

/// An IP peer: IPv4 (an IPv4-mapped IPv6 address counts as IPv4, as Go's
/// `To4` does) or IPv6 in its canonical text form, and its port.
pub(crate) fn ip_address(addr: SocketAddr) -> Address {
    let (kind, ip) = match addr.ip() {
        IpAddr::V4(v4) => (Type::Ipv4, IpAddr::V4(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => (Type::Ipv4, IpAddr::V4(v4)),
            None => (Type::Ipv6, IpAddr::V6(v6)),
        },
    };
    Address {
        r#type: kind as i32,
        address: ip.to_string(),
        ip_port: u32::from(addr.port()),
    }
}

/// A Unix socket peer, by its path (empty for an unnamed socket, as Go
/// prints one).
#[cfg(unix)]
pub(crate) fn unix_address(path: Option<&std::path::Path>) -> Address {
    Address {
        r#type: Type::Unix as i32,
        address: path
            .map(|path| path.to_string_lossy().into_owned())
            .unwrap_or_default(),
        ip_port: 0,
    }
}
