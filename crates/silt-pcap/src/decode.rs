//! Frame decoding: link layer -> VLAN/MPLS/PPPoE -> IP -> transport, following tunnels down to
//! the innermost flow. Touches nothing but the bytes it is given; allocation-free.
//!
//! IP headers (IPv4 options, IPv6 extension headers, fragment headers) are parsed with
//! `etherparse`'s lax slicer, which tolerates frames cut off by the snap length. The link
//! layers and tunnel headers below are written by hand because `etherparse` has no Linux SLL2,
//! BSD NULL/loopback, NFLOG, PPPoE, MPLS, GRE, ERSPAN, VXLAN, Geneve or Teredo decoding, and
//! because silt needs to walk into tunnels (re-entering the Ethernet or IP decoder) and keep each
//! outer layer, which its `SlicedPacket` does not model. Every hand-written step checks lengths
//! before it reads, so a short or hostile frame ends in an error, never a panic.
//!
//! The exact rules are documented in `docs/pcap.md`.

use std::borrow::Cow;
use std::net::IpAddr;

use etherparse::{IpFragOffset, LaxIpSlice};

/// How many tunnel layers are kept (deeper nesting stops decoding at that layer).
pub const MAX_TUNNELS: usize = 8;
/// How many VLAN tags are looked at; the first two are reported (outer, inner).
const MAX_VLAN_TAGS: usize = 16;

/// Ethertypes used below.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const MPLS_UC: u16 = 0x8847;
    pub const MPLS_MC: u16 = 0x8848;
    pub const PPPOE_SESSION: u16 = 0x8864;
    pub const TEB: u16 = 0x6558;
    pub const ERSPAN_2: u16 = 0x88be;
    pub const ERSPAN_3: u16 = 0x22eb;
    pub const PPP: u16 = 0x880b;
}

/// One encapsulation layer that was removed to reach the innermost flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// `vxlan`, `geneve`, `gre`, `erspan`, `teredo`, `4in4`, `6in4`, `4in6`, `6in6`, `mpls`.
    pub kind: &'static str,
    /// Outer source address (none for MPLS).
    pub src: Option<IpAddr>,
    /// Outer destination address (none for MPLS).
    pub dst: Option<IpAddr>,
    /// VXLAN/Geneve VNI, GRE key, ERSPAN session id, MPLS bottom-of-stack label.
    pub key: Option<u32>,
}

const NO_TUNNEL: Tunnel = Tunnel {
    kind: "",
    src: None,
    dst: None,
    key: None,
};

/// Position of an IP packet in a fragmented datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragment {
    /// Not fragmented.
    No,
    /// The first fragment (offset 0, more fragments follow): it carries the transport header.
    First,
    /// A later fragment: no transport header, so no ports.
    Later,
}

/// The network and transport layers of the innermost IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Transport protocol (after IPv6 extension headers).
    pub proto: u8,
    /// IPv4 total length / IPv6 payload length + 40, from the header.
    pub ip_len: u32,
    pub fragment: Fragment,
    /// TCP/UDP/SCTP ports when the transport header's first 4 bytes were captured.
    pub ports: Option<(u16, u16)>,
    /// ICMP/ICMPv6 type and code.
    pub icmp: Option<(u8, u8)>,
    pub tcp_flags: Option<u8>,
    pub tcp_seq: u32,
    /// Transport payload bytes per the IP length fields (not limited by the snap length).
    pub payload_bytes: u32,
}

/// Everything decoded from one frame. Reused between frames (see [`Decoded::clear`]).
#[derive(Debug, Clone, Copy)]
pub struct Decoded {
    /// The last ethertype seen (0x0800/0x86dd for IP over Ethernet); `None` when the link layer
    /// has none (raw IP, NULL) or the frame is IEEE 802.3 with a length field.
    pub ethertype: Option<u16>,
    /// VLAN ids in the order they appear (outer first), across all layers.
    pub vlans: [u16; 2],
    pub nvlans: u8,
    pub ip: Option<IpInfo>,
    pub tunnels: [Tunnel; MAX_TUNNELS],
    pub ntunnels: u8,
    /// Where the innermost IP packet's UDP payload lies in the frame (offset, length), when
    /// that packet is UDP, not a fragment, and its 8-byte header was captured; the length is
    /// the UDP length field's, cut to what was captured. See [`Decoded::udp_payload`].
    udp: Option<(usize, usize)>,
}

impl Default for Decoded {
    fn default() -> Self {
        Self {
            ethertype: None,
            vlans: [0; 2],
            nvlans: 0,
            ip: None,
            tunnels: [NO_TUNNEL; MAX_TUNNELS],
            ntunnels: 0,
            udp: None,
        }
    }
}

impl Decoded {
    /// Resets for the next frame.
    pub fn clear(&mut self) {
        self.ethertype = None;
        self.nvlans = 0;
        self.ip = None;
        self.ntunnels = 0;
        self.udp = None;
    }

    /// The innermost IP packet's UDP payload within `frame` (the bytes given to
    /// [`decode_frame`]), if that packet is UDP and not fragmented. Flow-export collectors
    /// (sFlow, NetFlow, IPFIX) read their datagrams through this.
    pub fn udp_payload<'a>(&self, frame: &'a [u8]) -> Option<&'a [u8]> {
        let (off, len) = self.udp?;
        frame.get(off..off.checked_add(len)?)
    }

    /// Outer VLAN id.
    pub fn vlan_outer(&self) -> Option<u16> {
        (self.nvlans >= 1).then_some(self.vlans[0])
    }

    /// Inner VLAN id (second tag).
    pub fn vlan_inner(&self) -> Option<u16> {
        (self.nvlans >= 2).then_some(self.vlans[1])
    }

    /// The tunnel layers, outermost first.
    pub fn tunnels(&self) -> &[Tunnel] {
        &self.tunnels[..self.ntunnels as usize]
    }

    fn push_vlan(&mut self, vid: u16) {
        if (self.nvlans as usize) < self.vlans.len() {
            self.vlans[self.nvlans as usize] = vid;
            self.nvlans += 1;
        }
    }

    fn push_tunnel(&mut self, t: Tunnel) -> bool {
        if (self.ntunnels as usize) < MAX_TUNNELS {
            self.tunnels[self.ntunnels as usize] = t;
            self.ntunnels += 1;
            true
        } else {
            false
        }
    }
}

/// Why a frame could not be decoded. Static text on the common paths; formatted only on errors.
pub type DecodeError = Cow<'static, str>;

/// Link types silt decodes (pcap `LINKTYPE_*` values).
pub mod linktype {
    pub const NULL: u32 = 0;
    pub const ETHERNET: u32 = 1;
    pub const RAW_OPENBSD: u32 = 12;
    pub const RAW_BSDOS: u32 = 14;
    pub const LOOP: u32 = 108;
    pub const RAW: u32 = 101;
    pub const LINUX_SLL: u32 = 113;
    pub const IPV4: u32 = 228;
    pub const IPV6: u32 = 229;
    pub const NFLOG: u32 = 239;
    pub const LINUX_SLL2: u32 = 276;
}

/// Decodes one captured frame of the given link type into `d` (cleared first).
///
/// `Err` means a layer silt decodes is malformed or truncated (the frame becomes a reject).
/// An unknown link type, ethertype or IP protocol is not an error: decoding stops there and the
/// frame is a row with what was decoded.
pub fn decode_frame(link: u32, data: &[u8], d: &mut Decoded) -> Result<(), DecodeError> {
    d.clear();
    let r = decode_link(link, data, d);
    // While decoding, `udp` holds the payload's address; from here on its offset in `data`.
    d.udp = d
        .udp
        .and_then(|(at, len)| Some((at.checked_sub(data.as_ptr() as usize)?, len)))
        .filter(|&(off, len)| off.checked_add(len).is_some_and(|end| end <= data.len()));
    r
}

fn decode_link(link: u32, data: &[u8], d: &mut Decoded) -> Result<(), DecodeError> {
    match link {
        linktype::ETHERNET => ethernet(data, d, 0),
        linktype::LINUX_SLL => {
            // Hand-written: 16-byte cooked header, protocol (an ethertype) in the last 2 bytes.
            let h = data
                .get(..16)
                .ok_or(Cow::Borrowed("truncated Linux SLL header"))?;
            ether_payload(be16(h, 14), &data[16..], d, 0)
        }
        linktype::LINUX_SLL2 => {
            // Hand-written: 20-byte SLL2 header, protocol type (ethertype) first.
            let h = data
                .get(..20)
                .ok_or(Cow::Borrowed("truncated Linux SLL2 header"))?;
            ether_payload(be16(h, 0), &data[20..], d, 0)
        }
        linktype::NULL | linktype::LOOP => {
            // Hand-written: 4-byte address family, host byte order for NULL (writer's host,
            // so accept either), network order for LOOP. AF_INET is 2 everywhere; AF_INET6 is
            // 24 (NetBSD/OpenBSD), 28 (FreeBSD), 30 (macOS), 10 (Linux).
            let h = data
                .get(..4)
                .ok_or(Cow::Borrowed("truncated NULL/loopback header"))?;
            let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let be = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            let fam = if link == linktype::LOOP || le > 0xffff {
                be
            } else {
                le
            };
            match fam {
                2 | 10 | 24 | 28 | 30 => ip(&data[4..], d, 0),
                _ => Ok(()),
            }
        }
        linktype::RAW | linktype::RAW_OPENBSD | linktype::RAW_BSDOS => ip(data, d, 0),
        linktype::IPV4 | linktype::IPV6 => ip(data, d, 0),
        linktype::NFLOG => nflog(data, d),
        _ => Ok(()),
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Hand-written: NFLOG (Linux netfilter log) is a 4-byte header followed by TLVs in host byte
/// order (little-endian on every capture seen); TLV type 9 (NFULA_PAYLOAD) holds the IP packet.
fn nflog(data: &[u8], d: &mut Decoded) -> Result<(), DecodeError> {
    if data.len() < 4 {
        return Err("truncated NFLOG header".into());
    }
    let mut rest = &data[4..];
    while rest.len() >= 4 {
        let len = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let typ = u16::from_le_bytes([rest[2], rest[3]]);
        if len < 4 || len > rest.len() {
            return Err("malformed NFLOG TLV".into());
        }
        if typ == 9 {
            return ip(&rest[4..len], d, 0);
        }
        let padded = (len + 3) & !3;
        rest = rest.get(padded..).unwrap_or(&[]);
    }
    Ok(())
}

fn ethernet(data: &[u8], d: &mut Decoded, depth: usize) -> Result<(), DecodeError> {
    if data.len() < 14 {
        return Err("truncated Ethernet header".into());
    }
    ether_payload(be16(data, 12), &data[14..], d, depth)
}

/// Follows an ethertype chain (VLAN tags, MPLS, PPPoE) to IP.
fn ether_payload(
    mut et: u16,
    mut data: &[u8],
    d: &mut Decoded,
    depth: usize,
) -> Result<(), DecodeError> {
    let mut tags = 0;
    loop {
        if et < 0x0600 {
            // IEEE 802.3 length field (LLC/SNAP frames such as STP): no ethertype.
            d.ethertype = None;
            return Ok(());
        }
        d.ethertype = Some(et);
        match et {
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD => {
                let h = data.get(..4).ok_or(Cow::Borrowed("truncated VLAN tag"))?;
                tags += 1;
                if tags > MAX_VLAN_TAGS {
                    return Err("too many VLAN tags".into());
                }
                d.push_vlan(be16(h, 0) & 0x0fff);
                et = be16(h, 2);
                data = &data[4..];
            }
            ethertype::MPLS_UC | ethertype::MPLS_MC => return mpls(data, d, depth),
            ethertype::PPPOE_SESSION => {
                let h = data
                    .get(..6)
                    .ok_or(Cow::Borrowed("truncated PPPoE header"))?;
                let _ = h;
                return ppp(&data[6..], d, depth);
            }
            ethertype::IPV4 | ethertype::IPV6 => return ip(data, d, depth),
            _ => return Ok(()),
        }
    }
}

/// PPP protocol field (1 byte when compressed, i.e. odd first byte) then IPv4/IPv6.
fn ppp(data: &[u8], d: &mut Decoded, depth: usize) -> Result<(), DecodeError> {
    let (proto, rest) = match data.first() {
        None => return Err("truncated PPP header".into()),
        Some(b) if b & 1 == 1 => (u16::from(*b), &data[1..]),
        Some(_) if data.len() >= 2 => (be16(data, 0), &data[2..]),
        Some(_) => return Err("truncated PPP header".into()),
    };
    match proto {
        0x0021 | 0x0057 => ip(rest, d, depth),
        _ => Ok(()),
    }
}

/// MPLS label stack, then IPv4/IPv6 by the first nibble, or a pseudo-wire control word
/// (first nibble 0) followed by an Ethernet frame.
fn mpls(mut data: &[u8], d: &mut Decoded, depth: usize) -> Result<(), DecodeError> {
    let mut labels = 0;
    let bottom = loop {
        let h = data
            .get(..4)
            .ok_or(Cow::Borrowed("truncated MPLS label stack"))?;
        labels += 1;
        if labels > 16 {
            return Err("MPLS label stack too deep".into());
        }
        let v = be32(h, 0);
        data = &data[4..];
        if v & 0x100 != 0 {
            break v >> 12;
        }
    };
    d.push_tunnel(Tunnel {
        kind: "mpls",
        src: None,
        dst: None,
        key: Some(bottom),
    });
    match data.first().map(|b| b >> 4) {
        Some(4) | Some(6) => ip(data, d, depth),
        Some(0) if data.len() >= 4 => ethernet(&data[4..], d, depth),
        _ => Ok(()),
    }
}

/// Decodes an IP packet (and what it carries, following tunnels) into `d.ip`.
fn ip(data: &[u8], d: &mut Decoded, depth: usize) -> Result<(), DecodeError> {
    let (info, inner) = parse_ip(data)?;
    d.ip = Some(info);
    d.udp = None;
    if let (17, Some(p)) = (info.proto, inner) {
        if p.len() >= 8 {
            // The UDP length field counts the 8-byte header; a smaller value is bogus and the
            // captured bytes are taken as they are.
            let udp_len = usize::from(be16(p, 4));
            let body = &p[8..];
            let len = if udp_len >= 8 {
                (udp_len - 8).min(body.len())
            } else {
                body.len()
            };
            d.udp = Some((body.as_ptr() as usize, len));
        }
    }
    if let Some(payload) = inner {
        if depth < MAX_TUNNELS {
            try_tunnel(&info, payload, d, depth);
        }
    }
    Ok(())
}

/// Parses one IP header and its transport header. Returns the complete transport payload too
/// (for tunnel detection) when the packet is not a fragment.
fn parse_ip(data: &[u8]) -> Result<(IpInfo, Option<&[u8]>), DecodeError> {
    let Some(first) = data.first() else {
        return Err("empty IP packet".into());
    };
    let version = first >> 4;
    if version != 4 && version != 6 {
        return Err(format!("bad IP version {version}").into());
    }
    let (slice, _ext_err) = LaxIpSlice::from_slice(data)
        .map_err(|e| Cow::Owned(format!("invalid IPv{version} header: {e}")))?;
    let (src, dst, ip_len, fragment) = match &slice {
        LaxIpSlice::Ipv4(s) => {
            let h = s.header();
            let frag = if h.fragments_offset() != IpFragOffset::ZERO {
                Fragment::Later
            } else if h.more_fragments() {
                Fragment::First
            } else {
                Fragment::No
            };
            (
                IpAddr::V4(h.source_addr()),
                IpAddr::V4(h.destination_addr()),
                u32::from(h.total_len()),
                frag,
            )
        }
        LaxIpSlice::Ipv6(s) => {
            let h = s.header();
            let exts = s.extensions();
            let frag = match exts.first_header() {
                Some(first) => ipv6_fragment(first.0, exts.slice()),
                None => Fragment::No,
            };
            (
                IpAddr::V6(h.source_addr()),
                IpAddr::V6(h.destination_addr()),
                u32::from(h.payload_length()) + 40,
                frag,
            )
        }
    };
    let pl = slice.payload();
    let proto = pl.ip_number.0;
    let p = pl.payload;
    // Transport length per the IP header (the captured payload may be cut by the snap length).
    let hdr_len = (p.as_ptr() as usize).saturating_sub(data.as_ptr() as usize) as u32;
    let l4_len = ip_len.saturating_sub(hdr_len);
    let mut info = IpInfo {
        src,
        dst,
        proto,
        ip_len,
        fragment,
        ports: None,
        icmp: None,
        tcp_flags: None,
        tcp_seq: 0,
        payload_bytes: 0,
    };
    if fragment != Fragment::Later {
        match proto {
            6 => {
                if p.len() >= 4 {
                    info.ports = Some((be16(p, 0), be16(p, 2)));
                }
                if p.len() >= 8 {
                    info.tcp_seq = be32(p, 4);
                }
                if p.len() >= 14 {
                    info.tcp_flags = Some(p[13]);
                    let off = u32::from(p[12] >> 4) * 4;
                    info.payload_bytes = l4_len.saturating_sub(off.max(20));
                }
            }
            17 | 132 => {
                if p.len() >= 4 {
                    info.ports = Some((be16(p, 0), be16(p, 2)));
                }
                info.payload_bytes = l4_len.saturating_sub(if proto == 17 { 8 } else { 12 });
            }
            1 | 58 => {
                if p.len() >= 2 {
                    info.icmp = Some((p[0], p[1]));
                }
                info.payload_bytes = l4_len.saturating_sub(8);
            }
            _ => info.payload_bytes = l4_len,
        }
    } else {
        info.payload_bytes = l4_len;
    }
    let inner = (fragment == Fragment::No).then_some(p);
    Ok((info, inner))
}

/// What the fragment header among IPv6 extension headers says (the last one, if several). `exts`
/// are the extension headers etherparse's lax slicer accepted (whole headers only), the first of
/// type `next`.
///
/// Walked by hand, with every length checked, rather than with etherparse's iterator
/// (`Ipv6ExtensionsSlice::into_iter`): in etherparse 0.19.0 (and 0.21.0, the newest release,
/// whose code is the same) the iterator goes on as long as a header's next-header field names
/// another extension header, even past the end of the accepted bytes. When the lax slicer
/// stopped at a header it could not take (cut short by the snap length, or a hop-by-hop header
/// not first), the iterator then reads that header's length byte from an empty slice
/// (`Ipv6RawExtHeaderSlice::from_slice_unchecked`, `ipv6_raw_ext_header_slice.rs:87`): an
/// out-of-bounds read, undefined behaviour in a release build (the first fuzz run's pcap and
/// pcapng crashes). Such a packet is still one row, decoded up to that header (`proto` is the
/// header's number and there are no ports), as for any packet cut by the snap length.
fn ipv6_fragment(mut next: u8, mut exts: &[u8]) -> Fragment {
    let mut frag = Fragment::No;
    // Every extension header is at least 8 bytes long.
    while exts.len() >= 8 {
        let len = match next {
            // Hop-by-hop, routing, destination options: length in 8-byte units after the first 8.
            0 | 43 | 60 => (usize::from(exts[1]) + 1) * 8,
            44 => 8,
            // Authentication header: length in 4-byte units, minus 2.
            51 => (usize::from(exts[1]) + 2) * 4,
            _ => break,
        };
        if len > exts.len() {
            break;
        }
        if next == 44 {
            // Read by hand (RFC 8200 4.5: 13-bit offset, then 2 reserved bits and the M flag in
            // the lowest bit): etherparse 0.19's `fragment_offset()` / `more_fragments()` read
            // other bits and call a first fragment a later one.
            let (offset, more) = (be16(exts, 2) >> 3, exts[3] & 1 != 0);
            frag = if offset != 0 {
                Fragment::Later
            } else if more {
                Fragment::First
            } else {
                Fragment::No
            };
        }
        next = exts[0];
        exts = &exts[len..];
    }
    frag
}

/// Looks for a tunnel in an IP packet's payload; on success the inner layers replace the outer
/// ones in `d` and the tunnel is recorded. A tunnel whose inner packet does not decode leaves
/// `d` describing the outer packet (as Suricata keeps the outer packet).
fn try_tunnel(outer: &IpInfo, p: &[u8], d: &mut Decoded, depth: usize) {
    let mk = |kind: &'static str, key: Option<u32>| Tunnel {
        kind,
        src: Some(outer.src),
        dst: Some(outer.dst),
        key,
    };
    // `d` is copied (a few hundred bytes) only where a tunnel may be, in `attempt`: a copy for
    // every packet was about 2 % of an sFlow import's CPU.
    let ok = match outer.proto {
        4 | 41 => {
            let kind = match (outer.src.is_ipv4(), outer.proto == 4) {
                (true, true) => "4in4",
                (true, false) => "6in4",
                (false, true) => "4in6",
                (false, false) => "6in6",
            };
            let want = if outer.proto == 4 { 4 } else { 6 };
            p.first().is_some_and(|b| b >> 4 == want)
                && attempt(d, |d| {
                    d.push_tunnel(mk(kind, None)) && ip(p, d, depth + 1).is_ok()
                })
        }
        47 => attempt(d, |d| gre(outer, p, d, depth)),
        17 if p.len() >= 8 => match (outer.ports, &p[8..]) {
            (Some((_, 4789)), p) if p.len() >= 8 && p[0] & 0x08 != 0 => attempt(d, |d| {
                d.push_tunnel(mk("vxlan", Some(be32(p, 4) >> 8)))
                    && ethernet(&p[8..], d, depth + 1).is_ok()
            }),
            (Some((_, 6081)), p) => attempt(d, |d| geneve(outer, p, d, depth)),
            (Some((3544, _)) | Some((_, 3544)), p) => attempt(d, |d| teredo(outer, p, d, depth)),
            (Some((_, 6635)), p) => attempt(d, |d| {
                // MPLS over UDP (RFC 7510).
                d.ntunnels < MAX_TUNNELS as u8
                    && mpls(p, d, depth + 1).is_ok()
                    && d.ip.is_some_and(|i| i != *outer)
            }),
            _ => false,
        },
        _ => false,
    };
    if ok && d.ip == Some(*outer) {
        // The tunnel's payload held no IP packet (e.g. ARP inside VXLAN): keep the tunnel,
        // the row describes the non-IP inner frame.
        d.ip = None;
        d.udp = None;
    }
}

/// Runs one tunnel decoder on `d`; unless it succeeds and leaves an IP layer, `d` is put back
/// as it was (the outer packet). Returns whether `d` now describes the tunnel's content.
fn attempt(d: &mut Decoded, decode: impl FnOnce(&mut Decoded) -> bool) -> bool {
    let saved = *d;
    let ok = decode(d) && d.ip.is_some();
    if !ok {
        *d = saved;
    }
    ok
}

/// GRE (RFC 2784/2890) version 0 with checksum/key/sequence, carrying IP, Ethernet (0x6558),
/// MPLS or ERSPAN type II/III; version 1 (PPTP) carrying PPP.
fn gre(outer: &IpInfo, p: &[u8], d: &mut Decoded, depth: usize) -> bool {
    if p.len() < 4 {
        return false;
    }
    let flags = p[0];
    let version = p[1] & 0x07;
    let proto = be16(p, 2);
    let (c, r, k, s) = (
        flags & 0x80 != 0,
        flags & 0x40 != 0,
        flags & 0x20 != 0,
        flags & 0x10 != 0,
    );
    if r {
        return false; // source routing (deprecated): not decoded
    }
    let mut off = 4;
    let mut key = None;
    if version == 1 {
        // PPTP enhanced GRE: key field holds payload length + call id; ack follows the seq.
        if proto != ethertype::PPP || !k {
            return false;
        }
        off += 4 + if s { 4 } else { 0 } + if p[1] & 0x80 != 0 { 4 } else { 0 };
        let Some(rest) = p.get(off..) else {
            return false;
        };
        let rest = rest.strip_prefix(&[0xff, 0x03]).unwrap_or(rest);
        return d.push_tunnel(Tunnel {
            kind: "gre",
            src: Some(outer.src),
            dst: Some(outer.dst),
            key: None,
        }) && ppp(rest, d, depth + 1).is_ok();
    }
    if version != 0 {
        return false;
    }
    if c {
        off += 4;
    }
    if k {
        if p.len() < off + 4 {
            return false;
        }
        key = Some(be32(p, off));
        off += 4;
    }
    if s {
        off += 4;
    }
    let Some(rest) = p.get(off..) else {
        return false;
    };
    let mut t = Tunnel {
        kind: "gre",
        src: Some(outer.src),
        dst: Some(outer.dst),
        key,
    };
    match proto {
        ethertype::ERSPAN_2 | ethertype::ERSPAN_3 => {
            // ERSPAN type I (no sequence number): Ethernet right away; type II: 8-byte header;
            // type III: 12 bytes plus an 8-byte platform sub-header when the O bit is set.
            let (hlen, session) = if proto == ethertype::ERSPAN_2 && !s {
                (0, None)
            } else if proto == ethertype::ERSPAN_2 {
                (8, rest.get(2..4).map(|b| u32::from(be16(b, 0) & 0x3ff)))
            } else {
                let o = rest.get(11).is_some_and(|b| b & 1 != 0);
                (
                    if o { 20 } else { 12 },
                    rest.get(2..4).map(|b| u32::from(be16(b, 0) & 0x3ff)),
                )
            };
            let Some(frame) = rest.get(hlen..) else {
                return false;
            };
            t.kind = "erspan";
            t.key = session;
            d.push_tunnel(t) && ethernet(frame, d, depth + 1).is_ok()
        }
        ethertype::TEB => d.push_tunnel(t) && ethernet(rest, d, depth + 1).is_ok(),
        ethertype::IPV4 | ethertype::IPV6 | ethertype::MPLS_UC | ethertype::MPLS_MC => {
            d.push_tunnel(t) && ether_payload(proto, rest, d, depth + 1).is_ok()
        }
        _ => false,
    }
}

/// Geneve (RFC 8926): 8-byte header plus options, protocol type 0x6558 (Ethernet) or IP.
fn geneve(outer: &IpInfo, p: &[u8], d: &mut Decoded, depth: usize) -> bool {
    if p.len() < 8 || p[0] >> 6 != 0 {
        return false;
    }
    let hlen = 8 + usize::from(p[0] & 0x3f) * 4;
    let proto = be16(p, 2);
    let Some(rest) = p.get(hlen..) else {
        return false;
    };
    let t = Tunnel {
        kind: "geneve",
        src: Some(outer.src),
        dst: Some(outer.dst),
        key: Some(be32(p, 4) >> 8),
    };
    match proto {
        ethertype::TEB => d.push_tunnel(t) && ethernet(rest, d, depth + 1).is_ok(),
        ethertype::IPV4 | ethertype::IPV6 => {
            d.push_tunnel(t) && ether_payload(proto, rest, d, depth + 1).is_ok()
        }
        _ => false,
    }
}

/// Teredo (RFC 4380) as Suricata decodes it: an optional origin indication (8 bytes starting
/// 0x0000), then an IPv6 header whose payload length matches the datagram exactly, a non-zero
/// hop limit, and a next header or payload. Authentication headers are not decoded.
fn teredo(outer: &IpInfo, p: &[u8], d: &mut Decoded, depth: usize) -> bool {
    let mut start = p;
    if start.len() < 40 {
        return false;
    }
    if start[0] == 0 {
        if start[1] == 0 && start.len() >= 48 {
            start = &start[8..];
        } else {
            return false;
        }
    }
    if start[0] >> 4 != 6 {
        return false;
    }
    let plen = usize::from(be16(start, 4));
    if start[7] == 0 || (start[6] == 0 && plen == 0) || start.len() != 40 + plen {
        return false;
    }
    d.push_tunnel(Tunnel {
        kind: "teredo",
        src: Some(outer.src),
        dst: Some(outer.dst),
        key: None,
    }) && ip(start, d, depth + 1).is_ok()
}
