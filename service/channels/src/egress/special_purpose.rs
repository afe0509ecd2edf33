//! Which addresses what leaves the node may reach by default (a tenant's webhook or
//! ntfy server, Slack's and Telegram's APIs, a trace collector): the globally reachable
//! ones, as IANA's registries define them, not a hand-picked list of ranges.
//!
//! The data is IANA's IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and
//! the RFCs that added to them, entries through 2024), each block with its
//! "Globally Reachable" column; a block the registry marks N/A or deprecated counts as
//! not reachable. An address takes the most specific block it falls in. IPv6 outside
//! every block is reachable only within 2000::/3, the one range IANA's IPv6 Address
//! Space registry allocates as global unicast (so site-local fec0::/10, SIIT's
//! ::ffff:0:0:0/96 and multicast are not); IPv4 outside every block is reachable
//! unless it is multicast (224.0.0.0/4 in IANA's IPv4 Address Space registry).
//! Addresses that carry an IPv4 address the socket really connects to (IPv4-mapped,
//! and NAT64's 64:ff9b::/96) are judged by that IPv4 address.
//!
//! To update it, compare [`IPV4`] and [`IPV6`] with the registries' CSV files
//! (iana-ipv4-special-registry-1.csv, iana-ipv6-special-registry-1.csv).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One block of a registry: its first address, its prefix length, whether it is
/// globally reachable, and its name in the registry.
struct Block<A> {
    first: A,
    len: u8,
    global: bool,
    #[allow(dead_code)]
    name: &'static str,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, global: bool, name: &'static str) -> Block<u32> {
    Block {
        first: u32::from_be_bytes([a, b, c, d]),
        len,
        global,
        name,
    }
}

const fn v6(segments: [u16; 8], len: u8, global: bool, name: &'static str) -> Block<u128> {
    let mut first = 0u128;
    let mut i = 0;
    while i < 8 {
        first = (first << 16) | segments[i] as u128;
        i += 1;
    }
    Block {
        first,
        len,
        global,
        name,
    }
}

/// IANA IPv4 Special-Purpose Address Registry.
const IPV4: &[Block<u32>] = &[
    v4(0, 0, 0, 0, 8, false, "\"This network\""),
    v4(0, 0, 0, 0, 32, false, "\"This host on this network\""),
    v4(10, 0, 0, 0, 8, false, "Private-Use"),
    v4(100, 64, 0, 0, 10, false, "Shared Address Space"),
    v4(127, 0, 0, 0, 8, false, "Loopback"),
    v4(169, 254, 0, 0, 16, false, "Link Local"),
    v4(172, 16, 0, 0, 12, false, "Private-Use"),
    v4(192, 0, 0, 0, 24, false, "IETF Protocol Assignments"),
    v4(192, 0, 0, 0, 29, false, "IPv4 Service Continuity Prefix"),
    v4(192, 0, 0, 8, 32, false, "IPv4 dummy address"),
    v4(192, 0, 0, 9, 32, true, "Port Control Protocol Anycast"),
    v4(
        192,
        0,
        0,
        10,
        32,
        true,
        "Traversal Using Relays around NAT Anycast",
    ),
    v4(192, 0, 0, 170, 32, false, "NAT64/DNS64 Discovery"),
    v4(192, 0, 0, 171, 32, false, "NAT64/DNS64 Discovery"),
    v4(192, 0, 2, 0, 24, false, "Documentation (TEST-NET-1)"),
    v4(192, 31, 196, 0, 24, true, "AS112-v4"),
    v4(192, 52, 193, 0, 24, true, "AMT"),
    v4(192, 88, 99, 0, 24, false, "Deprecated (6to4 Relay Anycast)"),
    v4(192, 168, 0, 0, 16, false, "Private-Use"),
    v4(192, 175, 48, 0, 24, true, "Direct Delegation AS112 Service"),
    v4(198, 18, 0, 0, 15, false, "Benchmarking"),
    v4(198, 51, 100, 0, 24, false, "Documentation (TEST-NET-2)"),
    v4(203, 0, 113, 0, 24, false, "Documentation (TEST-NET-3)"),
    v4(240, 0, 0, 0, 4, false, "Reserved"),
    v4(255, 255, 255, 255, 32, false, "Limited Broadcast"),
];

/// IANA IPv6 Special-Purpose Address Registry.
const IPV6: &[Block<u128>] = &[
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, false, "Loopback Address"),
    v6([0; 8], 128, false, "Unspecified Address"),
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        false,
        "IPv4-mapped Address",
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        true,
        "IPv4-IPv6 Translat.",
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        false,
        "IPv4-IPv6 Translat.",
    ),
    v6(
        [0x100, 0, 0, 0, 0, 0, 0, 0],
        64,
        false,
        "Discard-Only Address Block",
    ),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, false, "Dummy IPv6 Prefix"),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        false,
        "IETF Protocol Assignments",
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, false, "TEREDO"),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 1],
        128,
        true,
        "Port Control Protocol Anycast",
    ),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, true, "TURN Anycast"),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 3],
        128,
        true,
        "DNS-SD Service Registration Protocol Anycast",
    ),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, false, "Benchmarking"),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, true, "AMT"),
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, true, "AS112-v6"),
    v6(
        [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
        28,
        false,
        "Deprecated (previously ORCHID)",
    ),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, true, "ORCHIDv2"),
    v6(
        [0x2001, 0x30, 0, 0, 0, 0, 0, 0],
        28,
        true,
        "Drone Remote ID Protocol Entity Tags",
    ),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        false,
        "Documentation",
    ),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, false, "6to4"),
    v6(
        [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
        48,
        true,
        "Direct Delegation AS112 Service",
    ),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, false, "Documentation"),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        false,
        "Segment Routing (SRv6) SIDs",
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, false, "Unique-Local"),
    v6(
        [0xfe80, 0, 0, 0, 0, 0, 0, 0],
        10,
        false,
        "Link-Local Unicast",
    ),
];

/// The most specific block of `blocks` that holds `address` (of `bits` bits).
fn most_specific<A>(blocks: &[Block<A>], address: A, bits: u32) -> Option<&Block<A>>
where
    A: Copy + PartialEq + std::ops::Shr<u32, Output = A>,
{
    blocks
        .iter()
        .filter(|b| {
            // Every block is at least a /4, so the shift stays below the width.
            let shift = bits - u32::from(b.len);
            address >> shift == b.first >> shift
        })
        .max_by_key(|b| b.len)
}

/// Whether IANA's registries make `ip` globally reachable (see the module's doc).
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    match most_specific(IPV4, u32::from(ip), 32) {
        Some(block) => block.global,
        None => !ip.is_multicast(),
    }
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    // The IPv4 address a socket connects to for these.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_global_v4(v4);
    }
    let bits = u128::from(ip);
    if bits >> 32 == u128::from(0x0064_ff9b_u32) << 64 {
        return is_global_v4(Ipv4Addr::from(bits as u32));
    }
    match most_specific(IPV6, bits, 128) {
        Some(block) => block.global,
        // 2000::/3, global unicast.
        None => bits >> 125 == 0b001,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_purpose_and_unallocated_addresses_are_not_global() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "100.64.0.1",
            "192.0.0.1",
            "192.0.0.170",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "192.88.99.1",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:0:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2001:2::1",
            "2002:7f00:1::",
            "2002:808:808::",
            "3fff::1",
            "5f00::1",
            "4000::1",
        ] {
            assert!(!is_global(ip.parse().expect(ip)), "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_global() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "192.0.0.9",
            "192.0.0.10",
            "192.31.196.1",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "2001:4:112::1",
            "2001:1::1",
            "2001:20::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(is_global(ip.parse().expect(ip)), "{ip}");
        }
    }
}
