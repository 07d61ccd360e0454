//! The simulated network both generators draw from: an internal client population, internal
//! servers, an Internet of named sites with addresses, URIs, certificates and files, and the
//! samplers (Zipf popularity, weighted choice) that give the data realistic statistics.
//!
//! Pure in-memory model built once from the seed; touches no files. Values that repeat in real
//! telemetry (domain names, the addresses a name resolves to, a site's certificate chain, a popular
//! file's hashes) are fixed per entity here, so lookups and joins in generated data behave like
//! real ones (a DNS answer is the address the next TLS connection goes to; a URL's file has the
//! same MD5 every time it is downloaded).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use base64::Engine as _;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore};

/// An address with both text forms precomputed, since they are written on every row.
#[derive(Clone, Debug)]
pub struct Addr {
    pub ip: IpAddr,
    /// Zeek/canonical text (`10.1.2.3`, `2001:db8::1`).
    pub zeek: Box<str>,
    /// Suricata's text: IPv6 fully expanded with leading zeros (`2001:0db8:0000:...`).
    pub eve: Box<str>,
    /// Inside `Site::local_nets` (10/8, 192.168/16, fd00::/8): Zeek's local_orig/local_resp.
    pub local: bool,
}

impl Addr {
    pub fn new(ip: IpAddr) -> Addr {
        let local = match ip {
            IpAddr::V4(a) => a.octets()[0] == 10 || (a.octets()[0] == 192 && a.octets()[1] == 168),
            IpAddr::V6(a) => (a.segments()[0] & 0xff00) == 0xfd00,
        };
        let eve = match ip {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => {
                let s = a.segments();
                format!(
                    "{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}",
                    s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
                )
            }
        };
        Addr {
            ip,
            zeek: ip.to_string().into(),
            eve: eve.into(),
            local,
        }
    }
    pub fn is_v6(&self) -> bool {
        self.ip.is_ipv6()
    }
}

/// Zipf(s) over `n` ranks, sampled by binary search in a precomputed CDF: hand-written because
/// sampling from a table is much cheaper per draw than rejection sampling, and the tables are
/// small (thousands of entries).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 1..=n.max(1) {
            acc += 1.0 / (k as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }
    /// A rank in `0..n` (0 most popular).
    #[inline]
    pub fn sample(&self, rng: &mut SmallRng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Weighted choice among a few options (linear scan: the lists are short).
#[inline]
pub fn pick<T: Copy>(rng: &mut SmallRng, items: &[(T, u32)]) -> T {
    let total: u32 = items.iter().map(|(_, w)| *w).sum();
    let mut r = rng.random_range(0..total);
    for (it, w) in items {
        if r < *w {
            return *it;
        }
        r -= *w;
    }
    items[items.len() - 1].0
}

/// Uniform choice.
#[inline]
pub fn one<T: Copy>(rng: &mut SmallRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

/// Log-normal sample (heavy-tailed sizes and durations): `exp(mu + sigma * N(0,1))`.
/// Box-Muller by hand: one normal draw is all that is needed and it keeps `rand_distr` out.
#[inline]
pub fn lognormal(rng: &mut SmallRng, mu: f64, sigma: f64) -> f64 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (mu + sigma * z).exp()
}

/// Exponential sample with the given mean.
#[inline]
pub fn exp(rng: &mut SmallRng, mean: f64) -> f64 {
    -mean * rng.random::<f64>().max(1e-12).ln()
}

/// Community ID v1 (seed 0) of a flow, as Zeek's community-id policy script and Suricata write
/// it: `1:` + base64(SHA1(seed, ordered (addr, port) pair, proto, pad)). For ICMP/ICMPv6, the
/// "ports" are the type and the counterpart type (echo request/reply are paired).
pub fn community_id(src: &IpAddr, dst: &IpAddr, sport: u16, dport: u16, proto: u8) -> String {
    fn bytes(a: &IpAddr) -> Vec<u8> {
        match a {
            IpAddr::V4(v) => v.octets().to_vec(),
            IpAddr::V6(v) => v.octets().to_vec(),
        }
    }
    let (sa, da) = (bytes(src), bytes(dst));
    let (mut sp, mut dp) = (sport, dport);
    let mut two_way = true;
    if proto == 1 || proto == 58 {
        // ICMP: the counterpart of a request type acts as destination "port".
        let pair = |t: u16| -> Option<u16> {
            match (proto, t) {
                (1, 8) => Some(0),
                (1, 0) => Some(8),
                (1, 13) => Some(14),
                (1, 14) => Some(13),
                (58, 128) => Some(129),
                (58, 129) => Some(128),
                _ => None,
            }
        };
        match pair(sport) {
            Some(p) => dp = p,
            None => two_way = false,
        }
    }
    let ordered = !two_way || (sa.as_slice(), sp) < (da.as_slice(), dp);
    let (a1, a2) = if ordered {
        (&sa, &da)
    } else {
        std::mem::swap(&mut sp, &mut dp);
        (&da, &sa)
    };
    let mut h = sha1_smol::Sha1::new();
    h.update(&0u16.to_be_bytes());
    h.update(a1);
    h.update(a2);
    h.update(&[proto, 0]);
    h.update(&sp.to_be_bytes());
    h.update(&dp.to_be_bytes());
    format!(
        "1:{}",
        base64::engine::general_purpose::STANDARD.encode(h.digest().bytes())
    )
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

/// Real, popular registrable domains (the head of the popularity distribution).
const POPULAR: &[&str] = &[
    "google.com",
    "googleapis.com",
    "gstatic.com",
    "youtube.com",
    "ytimg.com",
    "googlevideo.com",
    "doubleclick.net",
    "google-analytics.com",
    "microsoft.com",
    "windowsupdate.com",
    "msftconnecttest.com",
    "live.com",
    "office.com",
    "office365.com",
    "outlook.com",
    "bing.com",
    "msn.com",
    "azureedge.net",
    "windows.net",
    "skype.com",
    "apple.com",
    "icloud.com",
    "mzstatic.com",
    "facebook.com",
    "fbcdn.net",
    "instagram.com",
    "whatsapp.net",
    "amazon.com",
    "amazonaws.com",
    "cloudfront.net",
    "akamaiedge.net",
    "akamaihd.net",
    "akamai.net",
    "edgekey.net",
    "cloudflare.com",
    "fastly.net",
    "twitter.com",
    "twimg.com",
    "linkedin.com",
    "licdn.com",
    "github.com",
    "githubusercontent.com",
    "slack.com",
    "zoom.us",
    "dropbox.com",
    "adobe.com",
    "wikipedia.org",
    "wikimedia.org",
    "reddit.com",
    "redditmedia.com",
    "netflix.com",
    "nflxvideo.net",
    "spotify.com",
    "yahoo.com",
    "digicert.com",
    "letsencrypt.org",
    "sectigo.com",
    "ubuntu.com",
    "canonical.com",
    "debian.org",
    "mozilla.org",
    "mozilla.net",
    "firefox.com",
    "symantec.com",
    "mcafee.com",
    "trendmicro.com",
    "sentry.io",
    "newrelic.com",
    "salesforce.com",
    "okta.com",
    "duckduckgo.com",
    "cnn.com",
    "nytimes.com",
    "bbc.co.uk",
    "espn.com",
    "weather.com",
    "paypal.com",
    "ebay.com",
    "stackoverflow.com",
    "docker.io",
    "pypi.org",
    "npmjs.org",
    "crates.io",
];

const SUBDOMAINS: &[(&str, u32)] = &[
    ("www", 30),
    ("", 12),
    ("api", 8),
    ("cdn", 6),
    ("static", 5),
    ("login", 3),
    ("mail", 2),
    ("update", 3),
    ("img", 3),
    ("ocsp", 2),
    ("clients", 2),
    ("accounts", 2),
    ("s", 2),
    ("assets", 2),
    ("edge", 1),
    ("telemetry", 2),
    ("download", 1),
    ("m", 1),
    ("auth", 1),
    ("ws", 1),
    ("metrics", 1),
    ("push", 1),
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "tra", "nex", "vor", "zen", "pi", "ro", "sta", "ten", "bu", "li", "mar",
    "co", "da", "fy", "ge", "ha", "jo", "qu", "ri", "sol", "tu", "vi", "wex", "ya", "zo", "net",
    "byte", "cloud", "data", "web", "shop", "news", "go", "app", "hub", "lab", "max", "pro",
    "tech", "on",
];

const TLDS: &[(&str, u32)] = &[
    ("com", 55),
    ("net", 12),
    ("org", 8),
    ("io", 5),
    ("de", 3),
    ("co.uk", 2),
    ("ru", 2),
    ("cn", 2),
    ("info", 2),
    ("xyz", 2),
    ("fr", 1),
    ("jp", 1),
    ("br", 1),
    ("edu", 2),
    ("us", 1),
    ("co", 1),
];

pub const USER_AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/64.0.3282.186 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:59.0) Gecko/20100101 Firefox/59.0",
    "Mozilla/5.0 (Windows NT 6.1; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/65.0.3325.162 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/58.0.3029.110 Safari/537.36 Edge/16.16299",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_13_3) AppleWebKit/604.5.6 (KHTML, like Gecko) Version/11.0.3 Safari/604.5.6",
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:58.0) Gecko/20100101 Firefox/58.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/64.0.3282.140 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 11_2_6 like Mac OS X) AppleWebKit/604.5.6 (KHTML, like Gecko) Version/11.0 Mobile/15D100 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 8.0.0; SM-G950F Build/R16NW) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/64.0.3282.137 Mobile Safari/537.36",
    "Microsoft-CryptoAPI/10.0",
    "Windows-Update-Agent/10.0.10011.16384 Client-Protocol/1.81",
    "Microsoft NCSI",
    "Debian APT-HTTP/1.3 (1.6~alpha7)",
    "Wget/1.19.4 (linux-gnu)",
    "curl/7.58.0",
    "python-requests/2.18.4",
    "Go-http-client/1.1",
    "okhttp/3.9.1",
];

const PATH_WORDS: &[&str] = &[
    "static",
    "js",
    "css",
    "img",
    "images",
    "assets",
    "api",
    "v1",
    "v2",
    "content",
    "media",
    "wp-content",
    "uploads",
    "themes",
    "scripts",
    "lib",
    "dist",
    "fonts",
    "ads",
    "pixel",
    "track",
    "update",
    "download",
    "files",
    "docs",
    "news",
    "search",
    "user",
    "account",
    "login",
    "cart",
    "product",
    "items",
    "feed",
    "msdownload",
    "pki",
    "crl",
    "ocsp",
    "ubuntu",
    "pool",
    "main",
    "dists",
    "en-us",
    "2018",
    "03",
];

/// (extension, mime type as libmagic/Zeek names it, log-normal mu of size in bytes)
pub const FILE_KINDS: &[(&str, &str, f64, u32)] = &[
    ("html", "text/html", 9.5, 20),
    ("js", "text/plain", 9.8, 14),
    ("css", "text/plain", 9.0, 8),
    ("png", "image/png", 9.2, 12),
    ("jpg", "image/jpeg", 10.5, 10),
    ("gif", "image/gif", 6.5, 6),
    ("json", "text/json", 7.5, 10),
    ("xml", "application/xml", 8.0, 3),
    ("crl", "application/pkix-crl", 8.5, 3),
    ("cab", "application/vnd.ms-cab-compressed", 13.0, 2),
    ("exe", "application/x-dosexec", 13.5, 1),
    ("deb", "application/vnd.debian.binary-package", 12.0, 2),
    ("zip", "application/zip", 12.5, 1),
    ("woff2", "application/font-woff", 10.0, 2),
    ("ico", "image/x-icon", 7.8, 2),
    ("txt", "text/plain", 7.0, 1),
];

/// An Internet site: a DNS name with fixed addresses, content and TLS certificate chain.
pub struct Site {
    pub domain: Box<str>,
    /// CNAME target written in DNS answers before the addresses (CDN-hosted sites).
    pub cname: Option<Box<str>>,
    pub v4: Vec<Addr>,
    pub v6: Vec<Addr>,
    pub ttl: u32,
    /// Share of this site's web connections that are TLS (out of 100).
    pub tls_pct: u8,
    pub paths: Vec<(Box<str>, u8)>, // (path, FILE_KINDS index)
    pub path_zipf: Zipf,
    /// SHA256 fingerprints (hex) of the leaf and intermediate certificates.
    pub cert_fps: Box<str>,
    /// Supports HTTP/2 (ALPN h2 in ssl.log next_protocol).
    pub h2: bool,
    pub tls13: bool,
}

pub struct Client {
    pub v4: Addr,
    pub v6: Option<Addr>,
    pub ua: u8,
    pub ua2: u8,
}

/// The whole simulated network.
pub struct World {
    pub clients: Vec<Client>,
    pub client_zipf: Zipf,
    pub sites: Vec<Site>,
    pub site_zipf: Zipf,
    pub resolvers: Vec<Addr>,
    pub resolver_v6: Addr,
    /// Internal servers (file servers, domain controllers, intranet web).
    pub servers: Vec<Addr>,
    pub ntp: Vec<Addr>,
    /// Internal AD domain used for search-list lookups and SRV records.
    pub ad_domain: &'static str,
    /// Public addresses of Internet scanners (inbound S0/REJ noise).
    pub scanners: Vec<Addr>,
    /// Misc. public peers (P2P, VPN, unknown ports).
    pub peers: Vec<Addr>,
    /// mDNS multicast groups.
    pub mdns4: Addr,
    pub mdns6: Addr,
    /// Popular file contents: (md5, sha1) hex per (site, path) is derived by hashing, see `file_hashes`.
    pub hash_salt: u64,
}

fn random_public_v4(rng: &mut SmallRng) -> Ipv4Addr {
    loop {
        let a: u32 = rng.random();
        let ip = Ipv4Addr::from(a);
        let o = ip.octets();
        let private = o[0] == 10
            || o[0] == 127
            || o[0] == 0
            || o[0] >= 224
            || (o[0] == 172 && (16..32).contains(&o[1]))
            || (o[0] == 192 && o[1] == 168)
            || (o[0] == 169 && o[1] == 254)
            || (o[0] == 100 && (64..128).contains(&o[1]));
        if !private {
            return ip;
        }
    }
}

/// Well-known provider IPv6 prefixes, so generated v6 addresses look like real allocations.
const V6_PREFIXES: &[[u16; 3]] = &[
    [0x2607, 0xf8b0, 0x4004],
    [0x2a00, 0x1450, 0x4001],
    [0x2620, 0x1ec, 0x0c11],
    [0x2a03, 0x2880, 0xf12f],
    [0x2600, 0x1406, 0x0034],
    [0x2606, 0x4700, 0x0000],
    [0x2a04, 0x4e42, 0x0000],
    [0x2001, 0x4860, 0x4802],
];

fn word(rng: &mut SmallRng) -> String {
    let n = rng.random_range(2..=3);
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(one(rng, SYLLABLES));
    }
    if rng.random_bool(0.15) {
        s.push_str(&rng.random_range(1..100).to_string());
    }
    s
}

impl World {
    pub fn new(rng: &mut SmallRng) -> World {
        // Clients: ~70% in 10.x/16 office subnets, ~30% in 192.168.x/24 (VPN, labs),
        // half of them dual-stack in one ULA /48.
        let n_clients = 4000;
        let subnets_10: Vec<(u8, u8)> = (0..24)
            .map(|_| (rng.random_range(1..255), rng.random_range(0..255)))
            .collect();
        let subnets_192: Vec<u8> = (0..10).map(|_| rng.random_range(0..255)).collect();
        let mut seen = std::collections::HashSet::new();
        let mut clients = Vec::with_capacity(n_clients);
        while clients.len() < n_clients {
            let ip = if rng.random_bool(0.7) {
                let (b, c) = one(rng, &subnets_10);
                Ipv4Addr::new(
                    10,
                    b,
                    c.wrapping_add(rng.random_range(0..4)),
                    rng.random_range(2..255),
                )
            } else {
                Ipv4Addr::new(192, 168, one(rng, &subnets_192), rng.random_range(2..255))
            };
            if !seen.insert(ip) {
                continue;
            }
            let v6 = if rng.random_bool(0.5) {
                let iid: u64 = rng.random();
                Some(Addr::new(IpAddr::V6(Ipv6Addr::new(
                    0xfd3a,
                    0x8c21,
                    0x1f07,
                    rng.random_range(1..16),
                    (iid >> 48) as u16,
                    (iid >> 32) as u16,
                    (iid >> 16) as u16,
                    iid as u16,
                ))))
            } else {
                None
            };
            let ua = pick_ua(rng);
            let ua2 = pick_ua(rng);
            clients.push(Client {
                v4: Addr::new(IpAddr::V4(ip)),
                v6,
                ua,
                ua2,
            });
        }

        // Sites: the real popular domains first (they take the head of the Zipf), then a long
        // tail of made-up but plausible names.
        let n_sites = 6000;
        let mut sites = Vec::with_capacity(n_sites);
        let mut names = std::collections::HashSet::new();
        let mut i = 0;
        while sites.len() < n_sites {
            let base = if i < POPULAR.len() * 3 {
                POPULAR[i % POPULAR.len()].to_string()
            } else {
                format!("{}.{}", word(rng), pick(rng, TLDS))
            };
            i += 1;
            let sub = if i <= POPULAR.len() {
                "www"
            } else {
                pick(rng, SUBDOMAINS)
            };
            let domain = if sub.is_empty() {
                base.clone()
            } else {
                format!("{sub}.{base}")
            };
            if !names.insert(domain.clone()) {
                continue;
            }
            sites.push(Site::new(rng, domain, &base));
        }

        let resolvers = vec![
            Addr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100))),
            Addr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 101))),
            Addr::new(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1))),
        ];
        let resolver_v6 = Addr::new(IpAddr::V6(Ipv6Addr::new(
            0xfd3a, 0x8c21, 0x1f07, 0, 0, 0, 0, 0x53,
        )));
        let servers = (0..40)
            .map(|k| {
                Addr::new(IpAddr::V4(Ipv4Addr::new(
                    10,
                    0,
                    (k / 10) as u8 + 1,
                    10 + (k % 10) as u8,
                )))
            })
            .collect();
        let ntp = (0..6)
            .map(|_| Addr::new(IpAddr::V4(random_public_v4(rng))))
            .collect();
        let scanners = (0..300)
            .map(|_| Addr::new(IpAddr::V4(random_public_v4(rng))))
            .collect();
        let peers = (0..2000)
            .map(|_| Addr::new(IpAddr::V4(random_public_v4(rng))))
            .collect();
        World {
            peers,
            mdns4: Addr::new(IpAddr::V4(Ipv4Addr::new(224, 0, 0, 251))),
            mdns6: Addr::new(IpAddr::V6(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xfb))),
            client_zipf: Zipf::new(clients.len(), 1.05),
            clients,
            site_zipf: Zipf::new(sites.len(), 1.1),
            sites,
            resolvers,
            resolver_v6,
            servers,
            ntp,
            ad_domain: "corp.example.lan",
            scanners,
            hash_salt: rng.random(),
        }
    }

    /// Deterministic (md5, sha1) of a (site, path): the same content every time it's fetched.
    pub fn file_hashes(&self, site: usize, path: usize, md5: &mut [u8; 16], sha1: &mut [u8; 20]) {
        let mut h = sha1_smol::Sha1::new();
        h.update(&self.hash_salt.to_le_bytes());
        h.update(&(site as u64).to_le_bytes());
        h.update(&(path as u64).to_le_bytes());
        let d = h.digest().bytes();
        sha1.copy_from_slice(&d);
        let mut h2 = sha1_smol::Sha1::new();
        h2.update(&d);
        md5.copy_from_slice(&h2.digest().bytes()[..16]);
    }
}

fn pick_ua(rng: &mut SmallRng) -> u8 {
    // Browsers dominate; tools and OS agents form the tail.
    let w: &[(u8, u32)] = &[
        (0, 30),
        (1, 10),
        (2, 12),
        (3, 8),
        (4, 8),
        (5, 4),
        (6, 5),
        (7, 4),
        (8, 4),
        (9, 4),
        (10, 4),
        (11, 3),
        (12, 2),
        (13, 1),
        (14, 2),
        (15, 2),
        (16, 1),
        (17, 1),
    ];
    pick(rng, w)
}

impl Site {
    fn new(rng: &mut SmallRng, domain: String, base: &str) -> Site {
        let cdn = rng.random_bool(0.3);
        let cname = cdn.then(|| {
            let edge = one(
                rng,
                &[
                    "edgekey.net",
                    "akamaiedge.net",
                    "cloudfront.net",
                    "fastly.net",
                    "azureedge.net",
                ],
            );
            format!("{}.{}", domain.replace('.', "-"), edge).into_boxed_str()
        });
        let n4 = pick(rng, &[(1usize, 50), (2, 25), (4, 15), (8, 10)]);
        let v4 = (0..n4)
            .map(|_| Addr::new(IpAddr::V4(random_public_v4(rng))))
            .collect();
        let n6 = if rng.random_bool(0.55) {
            rng.random_range(1..=2)
        } else {
            0
        };
        let pfx = one(rng, V6_PREFIXES);
        let v6 = (0..n6)
            .map(|_| {
                Addr::new(IpAddr::V6(Ipv6Addr::new(
                    pfx[0],
                    pfx[1],
                    pfx[2],
                    rng.random_range(0..0x20),
                    0,
                    0,
                    0,
                    rng.random_range(1..0x300),
                )))
            })
            .collect();
        let ttl = pick(
            rng,
            &[
                (20u32, 10),
                (60, 20),
                (300, 30),
                (3600, 20),
                (86400, 5),
                (120, 15),
            ],
        );
        let n_paths = rng.random_range(3..120);
        let mut paths = Vec::with_capacity(n_paths);
        for _ in 0..n_paths {
            let kind = {
                let w: Vec<(u8, u32)> = FILE_KINDS
                    .iter()
                    .enumerate()
                    .map(|(i, k)| (i as u8, k.3))
                    .collect();
                pick(rng, &w)
            };
            let depth = rng.random_range(0..4);
            let mut p = String::new();
            for _ in 0..depth {
                p.push('/');
                p.push_str(one(rng, PATH_WORDS));
            }
            p.push('/');
            if FILE_KINDS[kind as usize].0 == "html" && rng.random_bool(0.3) {
                // "/" and directory-style pages
            } else {
                p.push_str(&word(rng));
                p.push('.');
                p.push_str(FILE_KINDS[kind as usize].0);
            }
            paths.push((p.into_boxed_str(), kind));
        }
        let mut fps = String::new();
        for k in 0..rng.random_range(2..=3) {
            if k > 0 {
                fps.push(',');
            }
            let mut b = [0u8; 32];
            rng.fill_bytes(&mut b);
            let mut v = Vec::new();
            crate::fmt::hex(&mut v, &b);
            fps.push_str(std::str::from_utf8(&v).unwrap_or_default());
        }
        let _ = base;
        Site {
            domain: domain.into_boxed_str(),
            cname,
            v4,
            v6,
            ttl,
            tls_pct: pick(rng, &[(95u8, 30), (70, 25), (40, 25), (10, 20)]),
            path_zipf: Zipf::new(n_paths, 1.2),
            paths,
            cert_fps: fps.into_boxed_str(),
            h2: rng.random_bool(0.6),
            tls13: rng.random_bool(0.6),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn community_id_matches_spec_examples() {
        // Values from corelight/community-id-spec baseline (tcp.pcap / icmp.pcap).
        let a = IpAddr::from_str("128.232.110.120").unwrap();
        let b = IpAddr::from_str("66.35.250.204").unwrap();
        assert_eq!(
            community_id(&a, &b, 34855, 80, 6),
            "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
        );
        // Reverse direction gives the same id.
        assert_eq!(
            community_id(&b, &a, 80, 34855, 6),
            "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
        );
    }

    #[test]
    fn eve_v6_is_expanded() {
        let a = Addr::new(IpAddr::from_str("2607:f8b0:400c:c03::1a").unwrap());
        assert_eq!(&*a.eve, "2607:f8b0:400c:0c03:0000:0000:0000:001a");
        assert_eq!(&*a.zeek, "2607:f8b0:400c:c03::1a");
    }
}
