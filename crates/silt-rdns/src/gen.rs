//! A generator of Rapid7-shaped reverse-DNS data (`ip,name` lines), deterministic for a seed.
//!
//! Touches only the writer it is given; [`write_csv_gz`] runs the line generation on one
//! helper thread while the calling thread compresses.
//!
//! Model: the address space is cut into networks (/24 to /20 for IPv4, /64 prefixes for IPv6),
//! each with one naming profile and a density (the share of its addresses that have a PTR):
//! ISP dynamic pools (`c-73-15-2-1.hsd1.ca.comcast.net`, `cpe-1-2-3-4.nyc.res.rr.com`,
//! `ip5b0c1d2e.dynamic.kabel.de`, `host-001-002-003-004.example.net`, reversed
//! `dsl-4-3-2-1.…`, `static.4.3.2.1.clients.your-server.de`, …) nearly full, hosting and cloud
//! ranges half full (`ec2-1-2-3-4.compute-1.amazonaws.com`, `vps1234.hoster.com`,
//! `mail.word.org`), enterprise ranges sparse with plain host names, a few networks with one
//! fixed name for every address. About 5 % of rows are IPv6 (dashed compressed addresses,
//! nibble names, plain hosts). ~0.1 % of rows repeat a recent address with another name.
//!
//! Order: [`Order::Sorted`] walks the networks by address (IPv4 then IPv6).
//! [`Order::Chunks`] (the default) interleaves 64 sorted streams over disjoint parts of the
//! address space in chunks of rows, so the output is sorted locally and unsorted overall, as
//! an external sort needs to be exercised.

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::mpsc;

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Row order of the generated data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// By address: all IPv4 rows ascending, then IPv6 ascending (duplicates aside).
    Sorted,
    /// Chunks of `chunk_rows` rows taken from 64 sorted streams in random order.
    Chunks { chunk_rows: u64 },
}

/// Options of the generator.
#[derive(Clone, Debug)]
pub struct GenOptions {
    pub rows: u64,
    pub seed: u64,
    pub order: Order,
    /// Share of IPv6 rows. Default 0.05.
    pub v6_share: f64,
    /// Share of rows repeating a recent address with another name. Default 0.001.
    pub dup_share: f64,
    /// Write an `ip,name` header line first. Default false.
    pub header: bool,
}

impl GenOptions {
    pub fn new(rows: u64, seed: u64) -> Self {
        GenOptions {
            rows,
            seed,
            order: Order::Chunks { chunk_rows: 20_000 },
            v6_share: 0.05,
            dup_share: 0.001,
            header: false,
        }
    }
}

/// Writes `rows` generated lines, gzip'd (level 6), with the default options.
pub fn write_csv_gz(rows: u64, seed: u64, w: impl Write) -> Result<()> {
    write_csv_gz_with(&GenOptions::new(rows, seed), w, |_| {})
}

/// Writes generated lines gzip'd (level 6); `each` sees every row's address (for sampling).
pub fn write_csv_gz_with(
    opts: &GenOptions,
    w: impl Write,
    mut each: impl FnMut(IpAddr),
) -> Result<()> {
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::new(6));
    let (tx, rx) = mpsc::sync_channel::<(Vec<u8>, Vec<IpAddr>)>(4);
    let (back_tx, back_rx) = mpsc::channel::<(Vec<u8>, Vec<IpAddr>)>();
    let o = opts.clone();
    let producer = std::thread::spawn(move || {
        let mut g = RowGen::new(&o);
        loop {
            let (mut buf, mut ips) = back_rx
                .try_recv()
                .unwrap_or_else(|_| (Vec::with_capacity(1 << 20), Vec::new()));
            buf.clear();
            ips.clear();
            while buf.len() < (1 << 20) - 512 {
                match g.next_row(&mut buf) {
                    Some(ip) => ips.push(ip),
                    None => break,
                }
            }
            let done = ips.is_empty() && buf.is_empty();
            if tx.send((buf, ips)).is_err() || done {
                return;
            }
        }
    });
    let mut result = Ok(());
    for (buf, ips) in rx {
        if buf.is_empty() && ips.is_empty() {
            break;
        }
        ips.iter().for_each(|ip| each(*ip));
        if let Err(e) = gz.write_all(&buf) {
            result = Err(e);
            break;
        }
        let _ = back_tx.send((buf, ips));
    }
    drop(back_tx);
    let _ = producer.join();
    result.context("writing the generated CSV failed")?;
    gz.finish().context("finishing the gzip stream failed")?;
    Ok(())
}

const STREAMS: usize = 64;

/// The row generator: call [`RowGen::next_row`] until it returns `None`.
pub struct RowGen {
    rng: SmallRng,
    order: Order,
    /// Rows still to write.
    left: u64,
    header: bool,
    dup_share: f64,
    v4: Vec<Stream>,
    v6: Vec<Stream>,
    /// Index into v4 ++ v6 of the stream of the current chunk, and rows left in the chunk.
    cur: usize,
    chunk_left: u64,
    recent: [IpAddr; 16],
}

struct Stream {
    v6: bool,
    /// Next address to consider; the end of this stream's part of the space.
    next: u128,
    end: u128,
    rows_left: u64,
    /// Mean gap between networks, in addresses.
    gap: u128,
    net: Option<Net>,
}

struct Net {
    start: u128,
    end: u128,
    /// For IPv6: step between hosts (1 for sequential, 0 for random interface ids).
    step: u128,
    density: f64,
    profile: Profile,
}

#[derive(Clone)]
enum Profile {
    /// prefix + address rendered in a style + suffix.
    Embedded {
        prefix: String,
        style: Style,
        suffix: String,
    },
    /// Plain names drawn per address: `prefix{n}.domain` or `word.tld` styles.
    Plain { kind: u8, domain: String },
    /// The same name for every address.
    Fixed(String),
}

#[derive(Clone, Copy)]
enum Style {
    Dashed,
    Dotted,
    RevDashed,
    RevDotted,
    Padded,
    PaddedDashed,
    Hex,
    LastTwo,
    V6Dashed,
    V6Nibbles,
    V6Hex,
}

const WORDS: &[&str] = &[
    "alpha",
    "amber",
    "apex",
    "atlas",
    "aurora",
    "azure",
    "beacon",
    "birch",
    "blue",
    "bolt",
    "bright",
    "brook",
    "cactus",
    "canyon",
    "cedar",
    "cloud",
    "cobalt",
    "comet",
    "coral",
    "crest",
    "crystal",
    "delta",
    "dune",
    "eagle",
    "echo",
    "ember",
    "falcon",
    "fern",
    "fjord",
    "flint",
    "forest",
    "fox",
    "frost",
    "galaxy",
    "garnet",
    "glacier",
    "granite",
    "harbor",
    "hawk",
    "hazel",
    "horizon",
    "indigo",
    "iris",
    "ivy",
    "jade",
    "jasper",
    "juniper",
    "kestrel",
    "lagoon",
    "lark",
    "lava",
    "lemon",
    "linden",
    "lotus",
    "lunar",
    "maple",
    "marble",
    "meadow",
    "mesa",
    "mint",
    "nebula",
    "nova",
    "oak",
    "ocean",
    "onyx",
    "orbit",
    "orchid",
    "pearl",
    "pebble",
    "pine",
    "pixel",
    "planet",
    "polar",
    "prairie",
    "quartz",
    "quill",
    "raven",
    "reef",
    "ridge",
    "river",
    "robin",
    "ruby",
    "sable",
    "sage",
    "sierra",
    "silver",
    "solar",
    "spruce",
    "star",
    "stone",
    "summit",
    "swift",
    "tango",
    "thunder",
    "tidal",
    "topaz",
    "trail",
    "tulip",
    "umber",
    "valley",
    "vertex",
    "violet",
    "willow",
    "wind",
    "zenith",
    "zephyr",
    "acme",
    "globex",
    "initech",
    "umbrella",
    "stark",
    "wayne",
    "hooli",
    "vandelay",
    "wonka",
    "cyberdyne",
    "soylent",
    "tyrell",
];
const TLDS: &[&str] = &[
    "com", "net", "org", "de", "fr", "nl", "co.uk", "jp", "br", "ru", "it", "pl", "es", "com.au",
    "ca", "in", "cn", "kr", "se", "ch", "io", "info", "biz", "us", "mx", "ar", "cz", "at", "be",
];
const STATES: &[&str] = &[
    "ca", "wa", "or", "tx", "fl", "ny", "nj", "pa", "il", "mi", "ga", "co", "ma", "va", "md", "mn",
];
const CITIES: &[&str] = &[
    "nyc", "lax", "chi", "dfw", "atl", "sea", "mia", "bos", "den", "phx", "fra", "ams", "lon",
    "par", "mad", "mil", "waw", "sto", "tok", "syd", "sao", "tor", "hkg", "sin",
];
const PLAIN_PREFIX: &[&str] = &[
    "mail", "www", "smtp", "mx", "ns", "vps", "server", "host", "web", "srv", "node", "gw",
];

fn pick<'a>(rng: &mut SmallRng, xs: &[&'a str]) -> &'a str {
    xs[rng.random_range(0..xs.len())]
}

impl RowGen {
    pub fn new(opts: &GenOptions) -> RowGen {
        let mut rng = SmallRng::seed_from_u64(opts.seed ^ 0x9e37_79b9_7f4a_7c15);
        let v6_rows = (opts.rows as f64 * opts.v6_share.clamp(0.0, 1.0)).round() as u64;
        let v4_rows = opts.rows - v6_rows;
        let n_streams = STREAMS as u64;
        // IPv4: 1.0.0.0 .. 223.255.255.255 split in STREAMS parts.
        let lo4: u128 = 1 << 24;
        let hi4: u128 = 224 << 24;
        let part4 = (hi4 - lo4) / STREAMS as u128;
        // Addresses a row needs on average (mean density ~0.6) and the room per stream.
        let v4 = (0..STREAMS)
            .map(|i| {
                let rows = v4_rows / n_streams + u64::from((i as u64) < v4_rows % n_streams);
                let need = (rows as f64 / 0.6) as u128 + 1;
                let nets = need / 1254 + 1;
                let gap = part4.saturating_sub(need) / nets;
                Stream {
                    v6: false,
                    next: lo4 + part4 * i as u128,
                    end: lo4 + part4 * (i as u128 + 1),
                    rows_left: rows,
                    gap,
                    net: None,
                }
            })
            .collect();
        // IPv6: inside 2001::/16 .. 2a10::/16 style global space, /64 networks far apart.
        let lo6: u128 = 0x2001 << 112;
        let hi6: u128 = 0x2c00 << 112;
        let part6 = (hi6 - lo6) / STREAMS as u128;
        let v6 = (0..STREAMS)
            .map(|i| {
                let rows = v6_rows / n_streams + u64::from((i as u64) < v6_rows % n_streams);
                let nets = u128::from(rows / 64 + 1);
                Stream {
                    v6: true,
                    next: lo6 + part6 * i as u128,
                    end: lo6 + part6 * (i as u128 + 1),
                    rows_left: rows,
                    gap: part6 / nets / 2,
                    net: None,
                }
            })
            .collect();
        let _ = rng.random::<u64>();
        RowGen {
            rng,
            order: opts.order,
            left: opts.rows,
            header: opts.header,
            dup_share: opts.dup_share,
            v4,
            v6,
            cur: 0,
            chunk_left: 0,
            recent: [IpAddr::V4(0.into()); 16],
        }
    }

    /// Appends one line (with `\n`) to `out` and returns its address; `None` when done.
    /// The header line (if any) is written together with the first row.
    pub fn next_row(&mut self, out: &mut Vec<u8>) -> Option<IpAddr> {
        if self.left == 0 {
            return None;
        }
        if self.header {
            out.extend_from_slice(b"ip,name\n");
            self.header = false;
        }
        self.left -= 1;
        if self.dup_share > 0.0 && self.rng.random_bool(self.dup_share) {
            let ip = self.recent[self.rng.random_range(0..16)];
            if !matches!(ip, IpAddr::V4(a) if u32::from(a) == 0) {
                write_ip(out, ip);
                out.push(b',');
                out.extend_from_slice(b"alias.");
                out.extend_from_slice(pick(&mut self.rng, WORDS).as_bytes());
                out.extend_from_slice(b".net\n");
                return Some(ip);
            }
        }
        let s = self.pick_stream();
        let ip = self.row_from(s, out);
        let slot = self.rng.random_range(0..16);
        self.recent[slot] = ip;
        Some(ip)
    }

    fn stream_mut(&mut self, i: usize) -> &mut Stream {
        if i < self.v4.len() {
            &mut self.v4[i]
        } else {
            &mut self.v6[i - self.v4.len()]
        }
    }

    fn pick_stream(&mut self) -> usize {
        let total = self.v4.len() + self.v6.len();
        if self.chunk_left > 0 && self.stream_mut(self.cur).rows_left > 0 {
            self.chunk_left -= 1;
            return self.cur;
        }
        match self.order {
            Order::Sorted => {
                let mut i = 0;
                while i < total && self.stream_mut(i).rows_left == 0 {
                    i += 1;
                }
                self.cur = i.min(total - 1);
                self.chunk_left = u64::MAX;
            }
            Order::Chunks { chunk_rows } => {
                // Random stream among those with rows left, weighted by rows left.
                let left: u64 = self.v4.iter().chain(&self.v6).map(|s| s.rows_left).sum();
                let mut r = self.rng.random_range(0..left.max(1));
                let mut chosen = 0;
                for i in 0..total {
                    let l = self.stream_mut(i).rows_left;
                    if r < l {
                        chosen = i;
                        break;
                    }
                    r -= l;
                }
                self.cur = chosen;
                self.chunk_left = chunk_rows.max(1) - 1;
            }
        }
        self.cur
    }

    fn row_from(&mut self, si: usize, out: &mut Vec<u8>) -> IpAddr {
        let mut rng = std::mem::replace(&mut self.rng, SmallRng::seed_from_u64(0));
        let s = self.stream_mut(si);
        s.rows_left = s.rows_left.saturating_sub(1);
        let (addr, profile) = loop {
            if s.net.is_none() {
                let net = new_net(&mut rng, s);
                s.net = Some(net);
            }
            let Some(net) = s.net.as_mut() else { continue };
            if net.start >= net.end {
                s.net = None;
                continue;
            }
            let a = net.start;
            net.start += if net.step == 0 { 1 } else { net.step };
            if net.step == 0 || rng.random_bool(net.density) {
                let a = if s.v6 && net.step == 0 {
                    // Random interface id inside the /64.
                    (a & !((1u128 << 64) - 1)) | u128::from(rng.random::<u64>())
                } else {
                    a
                };
                break (a, net.profile.clone());
            }
        };
        let ip = if s.v6 {
            IpAddr::V6(Ipv6Addr::from(addr))
        } else {
            IpAddr::V4((addr as u32).into())
        };
        write_ip(out, ip);
        out.push(b',');
        write_name(&mut rng, out, ip, &profile);
        out.push(b'\n');
        self.rng = rng;
        ip
    }
}

fn new_net(rng: &mut SmallRng, s: &mut Stream) -> Net {
    let gap = if s.gap == 0 {
        0
    } else {
        rng.random_range(0..s.gap.saturating_mul(2).max(1))
    };
    if s.v6 {
        let start = (s.next + gap) & !((1u128 << 64) - 1);
        let start = if start >= s.end {
            s.end - (1 << 64)
        } else {
            start
        };
        s.next = start + (1 << 64);
        let sequential = rng.random_bool(0.6);
        let hosts = rng.random_range(8..200u128);
        let profile = v6_profile(rng);
        Net {
            start: start + 1,
            end: start + 1 + hosts,
            step: if sequential { 1 } else { 0 },
            density: 0.9,
            profile,
        }
    } else {
        let size: u128 = match rng.random_range(0..10) {
            0..=4 => 256,
            5..=7 => 1024,
            _ => 4096,
        };
        // Never jump past the room left (keeps Sorted ascending; wraps only when full).
        let room = s.end.saturating_sub(s.next).saturating_sub(2 * size);
        let mut start = (s.next + gap.min(room / 2)) & !(size - 1);
        if start < s.next {
            start += size;
        }
        if start + size > s.end {
            // Out of room: wrap to the stream start (rare; produces duplicate addresses).
            start = (s.end - size) & !(size - 1);
        }
        s.next = start + size;
        let (profile, density) = v4_profile(rng);
        Net {
            start,
            end: start + size,
            step: 1,
            density,
            profile,
        }
    }
}

fn v4_profile(rng: &mut SmallRng) -> (Profile, f64) {
    let isp = format!(
        "{}{}",
        pick(rng, WORDS),
        pick(rng, &["net", "tel", "com", "link", "fiber", "online"])
    );
    let tld = pick(rng, TLDS);
    let e = |prefix: String, style: Style, suffix: String| Profile::Embedded {
        prefix,
        style,
        suffix,
    };
    let r = rng.random_range(0..100);
    let full = 0.85 + rng.random::<f64>() * 0.15;
    match r {
        0..=11 => (
            e(
                "c-".into(),
                Style::Dashed,
                format!(".hsd1.{}.comcast.net", pick(rng, STATES)),
            ),
            full,
        ),
        12..=19 => (
            e(
                "cpe-".into(),
                Style::Dashed,
                format!(".{}.res.rr.com", pick(rng, CITIES)),
            ),
            full,
        ),
        20..=27 => (
            e(
                String::new(),
                Style::Dashed,
                format!(".dynamic.{isp}.{tld}"),
            ),
            full,
        ),
        28..=33 => (
            e(
                "static.".into(),
                Style::RevDotted,
                ".clients.your-server.de".into(),
            ),
            0.3 + rng.random::<f64>() * 0.4,
        ),
        34..=39 => (
            e("host-".into(), Style::PaddedDashed, format!(".{isp}.{tld}")),
            full,
        ),
        40..=45 => (
            e(
                format!("{}-", pick(rng, &["dsl", "adsl", "pool", "dyn", "ppp"])),
                Style::RevDashed,
                format!(".{}.{isp}.{tld}", pick(rng, CITIES)),
            ),
            full,
        ),
        46..=50 => (
            e(
                "ec2-".into(),
                Style::Dashed,
                format!(
                    ".{}.compute.amazonaws.com",
                    pick(rng, &["us-west-2", "eu-west-1", "ap-south-1", "us-east-2"])
                ),
            ),
            0.4 + rng.random::<f64>() * 0.5,
        ),
        51..=54 => (e("ip-".into(), Style::Dashed, ".ec2.internal".into()), 0.5),
        55..=59 => (
            e("ip".into(), Style::Hex, format!(".dynamic.{isp}.{tld}")),
            full,
        ),
        60..=63 => (
            e(
                "p".into(),
                Style::Padded,
                format!(".{}.{isp}.{tld}", pick(rng, CITIES)),
            ),
            full,
        ),
        64..=67 => (
            e(String::new(), Style::Dotted, format!(".static.{isp}.{tld}")),
            0.6,
        ),
        68..=70 => (
            e(
                pick(rng, &["mx", "host", "customer"]).to_string(),
                Style::LastTwo,
                format!(".{}.{isp}.{tld}", pick(rng, CITIES)),
            ),
            full,
        ),
        71..=74 => (
            e(
                "dsl-".into(),
                Style::RevDashed,
                format!(".{}.{isp}.{tld}", pick(rng, STATES)),
            ),
            full,
        ),
        75..=78 => (
            Profile::Fixed(format!(
                "{}.{isp}.{tld}",
                pick(rng, &["unassigned", "unknown", "no-reverse", "customer"])
            )),
            0.7,
        ),
        79..=89 => (
            Profile::Plain {
                kind: rng.random_range(0..4),
                domain: format!("{isp}.{tld}"),
            },
            0.05 + rng.random::<f64>() * 0.4,
        ),
        _ => (
            Profile::Plain {
                kind: 9,
                domain: String::new(),
            },
            0.02 + rng.random::<f64>() * 0.1,
        ),
    }
}

fn v6_profile(rng: &mut SmallRng) -> Profile {
    let isp = format!(
        "{}{}",
        pick(rng, WORDS),
        pick(rng, &["net", "tel", "com", "link"])
    );
    let tld = pick(rng, TLDS);
    match rng.random_range(0..10) {
        0..=3 => Profile::Embedded {
            prefix: String::new(),
            style: Style::V6Dashed,
            suffix: format!(".ipv6.{isp}.{tld}"),
        },
        4 => Profile::Embedded {
            prefix: String::new(),
            style: Style::V6Nibbles,
            suffix: format!(".ip6.{isp}.{tld}"),
        },
        5 => Profile::Embedded {
            prefix: "ip6-".into(),
            style: Style::V6Hex,
            suffix: format!(".{isp}.{tld}"),
        },
        6..=8 => Profile::Plain {
            kind: rng.random_range(0..4),
            domain: format!("{isp}.{tld}"),
        },
        _ => Profile::Fixed(format!("ipv6.{isp}.{tld}")),
    }
}

fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            let [a, b, c, d] = a.octets();
            dotted(out, [a, b, c, d]);
        }
        IpAddr::V6(a) => {
            let _ = write!(out, "{a}");
        }
    }
}

fn dotted(out: &mut Vec<u8>, o: [u8; 4]) {
    let mut b = itoa::Buffer::new();
    for (i, x) in o.iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        out.extend_from_slice(b.format(*x).as_bytes());
    }
}

fn sep(out: &mut Vec<u8>, o: [u8; 4], s: u8, pad: bool) {
    let mut b = itoa::Buffer::new();
    for (i, x) in o.iter().enumerate() {
        if i > 0 && s != 0 {
            out.push(s);
        }
        let t = b.format(*x).as_bytes();
        if pad {
            out.extend(std::iter::repeat_n(b'0', 3 - t.len()));
        }
        out.extend_from_slice(t);
    }
}

fn write_name(rng: &mut SmallRng, out: &mut Vec<u8>, ip: IpAddr, p: &Profile) {
    match p {
        Profile::Fixed(n) => out.extend_from_slice(n.as_bytes()),
        Profile::Embedded {
            prefix,
            style,
            suffix,
        } => {
            out.extend_from_slice(prefix.as_bytes());
            match ip {
                IpAddr::V4(a) => {
                    let o = a.octets();
                    let r = [o[3], o[2], o[1], o[0]];
                    match style {
                        Style::Dashed => sep(out, o, b'-', false),
                        Style::Dotted => sep(out, o, b'.', false),
                        Style::RevDashed => sep(out, r, b'-', false),
                        Style::RevDotted => sep(out, r, b'.', false),
                        Style::Padded => sep(out, o, 0, true),
                        Style::PaddedDashed => sep(out, o, b'-', true),
                        Style::Hex => {
                            let _ = write!(out, "{:08x}", u32::from(a));
                        }
                        _ => {
                            let mut b = itoa::Buffer::new();
                            out.extend_from_slice(b.format(o[2]).as_bytes());
                            out.push(b'-');
                            out.extend_from_slice(b.format(o[3]).as_bytes());
                        }
                    }
                }
                IpAddr::V6(a) => {
                    let v = u128::from(a);
                    match style {
                        Style::V6Nibbles => {
                            for i in 0..32 {
                                if i > 0 {
                                    out.push(b'.');
                                }
                                out.push(b"0123456789abcdef"[((v >> (4 * i)) & 0xf) as usize]);
                            }
                        }
                        Style::V6Hex => {
                            let _ = write!(out, "{v:032x}");
                        }
                        _ => {
                            let s = a.to_string().replace(':', "-");
                            out.extend_from_slice(s.as_bytes());
                        }
                    }
                }
            }
            out.extend_from_slice(suffix.as_bytes());
        }
        Profile::Plain { kind, domain } => {
            let mut b = itoa::Buffer::new();
            match kind {
                0 => {
                    out.extend_from_slice(pick(rng, PLAIN_PREFIX).as_bytes());
                    out.extend_from_slice(b.format(rng.random_range(1..5000u32)).as_bytes());
                    out.push(b'.');
                    out.extend_from_slice(domain.as_bytes());
                }
                1 => {
                    out.extend_from_slice(pick(rng, PLAIN_PREFIX).as_bytes());
                    out.push(b'.');
                    out.extend_from_slice(pick(rng, WORDS).as_bytes());
                    out.push(b'.');
                    out.extend_from_slice(domain.as_bytes());
                }
                2 => {
                    out.extend_from_slice(pick(rng, WORDS).as_bytes());
                    out.push(b'-');
                    out.extend_from_slice(pick(rng, WORDS).as_bytes());
                    out.push(b'.');
                    out.extend_from_slice(domain.as_bytes());
                }
                3 => {
                    out.extend_from_slice(pick(rng, WORDS).as_bytes());
                    out.extend_from_slice(b.format(rng.random_range(1..100u32)).as_bytes());
                    out.push(b'.');
                    out.extend_from_slice(domain.as_bytes());
                }
                _ => {
                    // Unrelated sites hosted here: www/mail of random word domains.
                    out.extend_from_slice(
                        pick(rng, &["www", "mail", "mx1", "ns1", "shop", "api"]).as_bytes(),
                    );
                    out.push(b'.');
                    out.extend_from_slice(pick(rng, WORDS).as_bytes());
                    if rng.random_bool(0.5) {
                        out.extend_from_slice(pick(rng, WORDS).as_bytes());
                    }
                    out.push(b'.');
                    out.extend_from_slice(pick(rng, TLDS).as_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_counted() {
        let gen = |order| {
            let mut o = GenOptions::new(5000, 7);
            o.order = order;
            let mut g = RowGen::new(&o);
            let mut buf = Vec::new();
            let mut n = 0;
            while g.next_row(&mut buf).is_some() {
                n += 1;
            }
            (n, buf)
        };
        let (n, a) = gen(Order::Chunks { chunk_rows: 100 });
        assert_eq!(n, 5000);
        assert_eq!(a, gen(Order::Chunks { chunk_rows: 100 }).1);
        assert_eq!(a.iter().filter(|b| **b == b'\n').count(), 5000);
        let (_, s) = gen(Order::Sorted);
        let text = String::from_utf8(s).unwrap();
        let ips: Vec<IpAddr> = text
            .lines()
            .filter(|l| !l.contains("alias."))
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect();
        let v4: Vec<_> = ips.iter().filter(|i| i.is_ipv4()).collect();
        if let Some(w) = v4.windows(2).find(|w| w[0] >= w[1]) {
            panic!("sorted order is not ascending: {w:?}");
        }
        let v6 = ips.len() - v4.len();
        assert!((150..=350).contains(&v6), "~5 % IPv6, got {v6}");
    }
}
