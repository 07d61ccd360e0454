//! Docker nginx logs as the fluentd Docker logging driver ships them: records
//! `{log_time, container_id, container_name, source, log}` with `log` an nginx `combined` line,
//! written as a MessagePack stream of maps or as NDJSON (same records, same order).
//!
//! Touches only the [`Write`] it is given.
//!
//! Realism: four containers (two nginx replicas of a shop front, an API gateway, a static
//! asset server) with fixed 64-hex ids and `/name` names as Docker reports them; ~30k clients
//! with a skewed activity (a few heavy clients, a long tail; ~6% IPv6); paths by container
//! (pages, hashed JS/CSS assets, product images, a JSON API with ids and query strings, bots'
//! `/robots.txt`, scanners' `/wp-login.php` and `/.env`); a status mix tied to the path
//! (~80% 200, 304s for assets, 301/302 redirects, 404s for scanners, 401 on login, a few 499
//! and 5xx); byte counts by content type; referers from the site and search engines; browser,
//! mobile, bot and tool user agents. About 0.5% of records are nginx error-log lines on
//! `stderr` (as in real containers), which do not match the access format.
//!
//! Time: records spread evenly over one hour from [`WeblogOptions::start_ms`] (default
//! 2024-03-24 12:00:00 UTC), `log_time` (epoch ms) increasing, and the line's `$time_local`
//! (`+0000`) is `log_time` truncated to the second.
//!
//! Size: with `target_bytes`, records are written until their MessagePack encoding reaches it
//! (whatever the output format, so the NDJSON file of the same options holds the same records);
//! with `records`, exactly that many.

use std::io::Write;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// 2024-03-24 12:00:00 UTC in epoch milliseconds.
pub const WEBLOG_START_MS: i64 = 1_711_281_600_000;

/// Output encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeblogFormat {
    Msgpack,
    Ndjson,
}

/// Generator settings.
#[derive(Debug, Clone)]
pub struct WeblogOptions {
    pub seed: u64,
    pub start_ms: i64,
    pub span_secs: u64,
    /// Stop when the MessagePack size of the records reaches this many bytes.
    pub target_bytes: Option<u64>,
    /// Or write exactly this many records.
    pub records: Option<u64>,
}

impl Default for WeblogOptions {
    fn default() -> Self {
        WeblogOptions {
            seed: 1,
            start_ms: WEBLOG_START_MS,
            span_secs: 3600,
            target_bytes: None,
            records: Some(10_000),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy, Default)]
pub struct WeblogReport {
    pub records: u64,
    /// Bytes written in the chosen format.
    pub bytes: u64,
    /// Records whose `log` is an access line (source stdout), and of those, status 200.
    pub access_lines: u64,
    pub status_200: u64,
}

const CONTAINERS: [(&str, u32); 4] = [
    ("/shop-web-1", 34),
    ("/shop-web-2", 33),
    ("/api-gateway", 23),
    ("/static-assets", 10),
];

const USER_AGENTS: [(&str, u32); 14] = [
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.0.0 Safari/537.36", 30),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.3.1 Safari/605.1.15", 12),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_3_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.3.1 Mobile/15E148 Safari/604.1", 15),
    ("Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.6261.105 Mobile Safari/537.36", 12),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:123.0) Gecko/20100101 Firefox/123.0", 7),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.0.0 Safari/537.36", 3),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.0.0 Safari/537.36 Edg/122.0.2365.66", 5),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", 4),
    ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", 2),
    ("Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", 2),
    ("curl/8.5.0", 2),
    ("python-requests/2.31.0", 2),
    ("okhttp/4.12.0", 3),
    ("kube-probe/1.29", 1),
];

const WORDS: [&str; 24] = [
    "shoes",
    "laptop",
    "coffee",
    "headphones",
    "jacket",
    "phone case",
    "backpack",
    "watch",
    "desk lamp",
    "running",
    "kids",
    "gift card",
    "sale",
    "blender",
    "camera",
    "tent",
    "yoga mat",
    "charger",
    "monitor",
    "keyboard",
    "sunglasses",
    "wallet",
    "socks",
    "rain coat",
];

const PAGES: [&str; 12] = [
    "/",
    "/cart",
    "/checkout",
    "/account",
    "/login",
    "/about",
    "/contact",
    "/category/women",
    "/category/men",
    "/category/electronics",
    "/deals",
    "/help/shipping",
];

struct Pick<'a, T>(&'a [(T, u32)], u32);

impl<'a, T: Copy> Pick<'a, T> {
    fn new(items: &'a [(T, u32)]) -> Self {
        Pick(items, items.iter().map(|i| i.1).sum())
    }
    fn pick(&self, rng: &mut SmallRng) -> T {
        let mut r = rng.random_range(0..self.1);
        for (v, w) in self.0 {
            if r < *w {
                return *v;
            }
            r -= w;
        }
        self.0[0].0
    }
}

struct Client {
    addr: String,
    ua: usize,
}

/// Streams the records to `out` (see the module documentation).
pub fn write_docker_nginx(
    out: &mut dyn Write,
    format: WeblogFormat,
    opts: &WeblogOptions,
) -> anyhow::Result<WeblogReport> {
    if opts.target_bytes.is_none() && opts.records.is_none() {
        anyhow::bail!("give a size (target bytes) or a record count");
    }
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    let containers: Vec<(String, &str)> = CONTAINERS
        .iter()
        .map(|(name, _)| {
            let id: String = (0..64)
                .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
                .collect();
            (id, *name)
        })
        .collect();
    let cont_pick = Pick::new(&[
        (0usize, CONTAINERS[0].1),
        (1, CONTAINERS[1].1),
        (2, CONTAINERS[2].1),
        (3, CONTAINERS[3].1),
    ]);
    let ua_weights: Vec<(usize, u32)> = USER_AGENTS
        .iter()
        .enumerate()
        .map(|(i, u)| (i, u.1))
        .collect();
    let ua_pick = Pick::new(&ua_weights);
    let clients: Vec<Client> = (0..30_000)
        .map(|i| {
            let addr = if rng.random_bool(0.06) {
                format!(
                    "2a02:{:x}:{:x}:{:x}::{:x}",
                    rng.random_range(0x1000..0xffffu32),
                    rng.random_range(0..0xffffu32),
                    rng.random_range(0..0xffffu32),
                    rng.random_range(1..0xffffu32)
                )
            } else {
                // Public-looking IPv4 (avoid 0/8, 10/8, 127/8, 224+).
                let a = [
                    31, 37, 45, 51, 62, 66, 77, 81, 86, 91, 94, 104, 109, 141, 151, 176, 185, 188,
                    193, 203, 212, 217,
                ][i % 22];
                format!(
                    "{a}.{}.{}.{}",
                    rng.random_range(0..256u32),
                    rng.random_range(0..256u32),
                    rng.random_range(1..255u32)
                )
            };
            Client {
                addr,
                ua: ua_pick.pick(&mut rng),
            }
        })
        .collect();
    let asset_hashes: Vec<String> = (0..40)
        .map(|_| format!("{:08x}", rng.random::<u32>()))
        .collect();

    let span_ms = opts.span_secs as i64 * 1000;
    let mut rep = WeblogReport::default();
    let mut mp: Vec<u8> = Vec::with_capacity(1024);
    let mut line = String::with_capacity(512);
    let mut json: Vec<u8> = Vec::with_capacity(1024);
    let mut mp_total = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    loop {
        let t_ms = match (opts.records, opts.target_bytes) {
            (Some(n), _) => {
                if rep.records >= n {
                    break;
                }
                opts.start_ms + span_ms * rep.records as i64 / n.max(1) as i64
            }
            (None, Some(t)) => {
                if mp_total >= t {
                    break;
                }
                opts.start_ms + (span_ms as i128 * mp_total as i128 / t.max(1) as i128) as i64
            }
            (None, None) => unreachable!(),
        };
        let ci = cont_pick.pick(&mut rng);
        // Skewed client activity: u^3 puts most requests on few clients.
        let u: f64 = rng.random();
        let client = &clients[((u * u * u) * clients.len() as f64) as usize % clients.len()];
        line.clear();
        let stderr = rng.random_bool(0.005);
        if stderr {
            error_line(&mut line, t_ms, client, &mut rng);
        } else {
            let status = access_line(&mut line, t_ms, ci, client, &asset_hashes, &mut rng);
            rep.access_lines += 1;
            if status == 200 {
                rep.status_200 += 1;
            }
        }
        let (id, name) = &containers[ci];
        let source = if stderr { "stderr" } else { "stdout" };
        mp.clear();
        encode_msgpack(&mut mp, t_ms, id, name, source, &line)?;
        mp_total += mp.len() as u64;
        match format {
            WeblogFormat::Msgpack => buf.extend_from_slice(&mp),
            WeblogFormat::Ndjson => {
                json.clear();
                json.extend_from_slice(b"{\"log_time\":");
                json.extend_from_slice(itoa::Buffer::new().format(t_ms).as_bytes());
                json.extend_from_slice(b",\"container_id\":\"");
                json.extend_from_slice(id.as_bytes());
                json.extend_from_slice(b"\",\"container_name\":");
                json_str(&mut json, name);
                json.extend_from_slice(b",\"source\":\"");
                json.extend_from_slice(source.as_bytes());
                json.extend_from_slice(b"\",\"log\":");
                json_str(&mut json, &line);
                json.extend_from_slice(b"}\n");
                buf.extend_from_slice(&json);
            }
        }
        rep.records += 1;
        if buf.len() >= 1 << 20 {
            out.write_all(&buf)?;
            rep.bytes += buf.len() as u64;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    rep.bytes += buf.len() as u64;
    out.flush()?;
    Ok(rep)
}

fn encode_msgpack(
    mp: &mut Vec<u8>,
    t_ms: i64,
    id: &str,
    name: &str,
    source: &str,
    log: &str,
) -> anyhow::Result<()> {
    use rmp::encode::{write_map_len, write_sint, write_str};
    write_map_len(mp, 5)?;
    write_str(mp, "log_time")?;
    write_sint(mp, t_ms)?;
    write_str(mp, "container_id")?;
    write_str(mp, id)?;
    write_str(mp, "container_name")?;
    write_str(mp, name)?;
    write_str(mp, "source")?;
    write_str(mp, source)?;
    write_str(mp, "log")?;
    write_str(mp, log)?;
    Ok(())
}

/// JSON string literal. Hand-written (no serde in this crate's dependencies, and this is the
/// per-record path): escapes `"`, `\` and control characters.
fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn civil(t_ms: i64) -> (i64, u32, u32, i64, i64, i64) {
    let secs = t_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, sod / 3600, sod % 3600 / 60, sod % 60)
}

fn access_line(
    line: &mut String,
    t_ms: i64,
    container: usize,
    client: &Client,
    hashes: &[String],
    rng: &mut SmallRng,
) -> u16 {
    use std::fmt::Write as _;
    let mut ua = USER_AGENTS[client.ua].0;
    if rng.random_bool(0.05) {
        ua = USER_AGENTS[rng.random_range(0..USER_AGENTS.len())].0;
    }
    let is_bot = ua.contains("bot") || ua.contains("Bot");
    let r: f64 = rng.random();
    let mut method = "GET";
    let (path, mut status, mut bytes): (String, u16, u64) = if r < 0.01 {
        // Scanners.
        let p = [
            "/wp-login.php",
            "/.env",
            "/.git/config",
            "/phpmyadmin/index.php",
            "/admin/config.php",
            "/xmlrpc.php",
        ][rng.random_range(0..6)];
        (p.to_string(), 404, 153)
    } else if is_bot && r < 0.3 {
        ("/robots.txt".to_string(), 200, 67)
    } else {
        match container {
            2 => {
                // API gateway: JSON API.
                let k: f64 = rng.random();
                if k < 0.25 {
                    method = "POST";
                    let p = [
                        "/api/v1/cart/items",
                        "/api/v1/events",
                        "/api/v1/auth/token",
                        "/api/v1/orders",
                    ][rng.random_range(0..4)];
                    let s = if p.ends_with("token") && rng.random_bool(0.15) {
                        401
                    } else if rng.random_bool(0.05) {
                        201
                    } else {
                        200
                    };
                    (p.to_string(), s, rng.random_range(40..900))
                } else if k < 0.27 {
                    method = ["PUT", "DELETE", "OPTIONS", "PATCH"][rng.random_range(0..4)];
                    (
                        format!("/api/v1/cart/items/{}", rng.random_range(1000..99999)),
                        204,
                        0,
                    )
                } else if k < 0.6 {
                    (
                        format!(
                            "/api/v1/products?category={}&page={}&sort={}",
                            rng.random_range(1..60),
                            rng.random_range(1..12),
                            ["price", "rating", "new"][rng.random_range(0..3)]
                        ),
                        200,
                        rng.random_range(2_000..40_000),
                    )
                } else if k < 0.85 {
                    (
                        format!("/api/v1/products/{}", rng.random_range(10_000..90_000)),
                        200,
                        rng.random_range(800..6_000),
                    )
                } else {
                    let w = WORDS[rng.random_range(0..WORDS.len())].replace(' ', "%20");
                    (
                        format!("/api/v1/search?q={w}&limit=24"),
                        200,
                        rng.random_range(1_500..30_000),
                    )
                }
            }
            3 => {
                // Static assets.
                let h = &hashes[rng.random_range(0..hashes.len())];
                let k: f64 = rng.random();
                if k < 0.45 {
                    (
                        format!(
                            "/images/products/{}/{}.webp",
                            rng.random_range(10_000..90_000),
                            ["200x200", "400x400", "800x800"][rng.random_range(0..3)]
                        ),
                        200,
                        rng.random_range(4_000..180_000),
                    )
                } else if k < 0.75 {
                    (
                        format!(
                            "/static/js/{}.{h}.js",
                            ["main", "vendor", "runtime", "checkout"][rng.random_range(0..4)]
                        ),
                        200,
                        rng.random_range(2_000..480_000),
                    )
                } else if k < 0.95 {
                    (
                        format!("/static/css/main.{h}.css"),
                        200,
                        rng.random_range(8_000..90_000),
                    )
                } else {
                    ("/favicon.ico".to_string(), 200, 4_286)
                }
            }
            _ => {
                // Shop front pages.
                let k: f64 = rng.random();
                if k < 0.5 {
                    let p = PAGES[(rng.random::<f64>().powi(2) * PAGES.len() as f64) as usize];
                    if p == "/login" && rng.random_bool(0.3) {
                        method = "POST";
                        let s = if rng.random_bool(0.2) { 401 } else { 302 };
                        (p.to_string(), s, if s == 302 { 0 } else { 1_024 })
                    } else {
                        (p.to_string(), 200, rng.random_range(9_000..70_000))
                    }
                } else if k < 0.85 {
                    (
                        format!(
                            "/product/{}/{}",
                            rng.random_range(10_000..90_000),
                            WORDS[rng.random_range(0..WORDS.len())].replace(' ', "-")
                        ),
                        200,
                        rng.random_range(20_000..95_000),
                    )
                } else if k < 0.93 {
                    let w = WORDS[rng.random_range(0..WORDS.len())].replace(' ', "+");
                    (
                        format!("/search?q={w}&page={}", rng.random_range(1..5)),
                        200,
                        rng.random_range(15_000..80_000),
                    )
                } else if k < 0.97 {
                    (format!("/p/{}", rng.random_range(1_000..9_999)), 301, 169)
                } else {
                    (
                        format!("/product/{}/discontinued", rng.random_range(1_000..9_999)),
                        404,
                        3_512,
                    )
                }
            }
        }
    };
    // Conditional GETs, cut connections and upstream failures.
    if method == "GET" && status == 200 {
        let k: f64 = rng.random();
        if (container == 3 && k < 0.25) || (container != 3 && k < 0.03) {
            status = 304;
            bytes = 0;
        } else if k > 0.996 {
            status = 499;
            bytes = 0;
        } else if k > 0.989 {
            status = [500, 502, 503, 504][rng.random_range(0..4)];
            bytes = [177, 157, 197, 167][rng.random_range(0..4)];
        }
    }
    let referer: String = match rng.random_range(0..10) {
        0..=4 => "-".into(),
        5 => "https://www.google.com/".into(),
        6 if container == 2 || container == 3 => "https://shop.example.com/".into(),
        _ => format!(
            "https://shop.example.com{}",
            PAGES[rng.random_range(0..PAGES.len())]
        ),
    };
    let (y, m, d, hh, mm, ss) = civil(t_ms);
    let _ = write!(
        line,
        "{} - - [{d:02}/{}/{y}:{hh:02}:{mm:02}:{ss:02} +0000] \"{method} {path} HTTP/{}\" {status} {bytes} \"{referer}\" \"{ua}\"",
        client.addr,
        MONTHS[m as usize - 1],
        if rng.random_bool(0.3) { "2.0" } else { "1.1" },
    );
    status
}

fn error_line(line: &mut String, t_ms: i64, client: &Client, rng: &mut SmallRng) {
    use std::fmt::Write as _;
    let (y, m, d, hh, mm, ss) = civil(t_ms);
    let (msg, req) = match rng.random_range(0..3) {
        0 => ("open() \"/usr/share/nginx/html/favicon.ico\" failed (2: No such file or directory)", "GET /favicon.ico HTTP/1.1"),
        1 => ("upstream timed out (110: Connection timed out) while reading response header from upstream", "GET /api/v1/products HTTP/1.1"),
        _ => ("connect() failed (111: Connection refused) while connecting to upstream", "POST /api/v1/orders HTTP/1.1"),
    };
    let _ = write!(
        line,
        "{y}/{m:02}/{d:02} {hh:02}:{mm:02}:{ss:02} [error] 29#29: *{} {msg}, client: {}, server: shop.example.com, request: \"{req}\", host: \"shop.example.com\"",
        rng.random_range(1000..999_999),
        client.addr
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_matches_known_dates() {
        // 1711281600000 = 2024-03-24T12:00:00Z
        assert_eq!(civil(1_711_281_600_000), (2024, 3, 24, 12, 0, 0));
        assert_eq!(civil(951_782_400_000), (2000, 2, 29, 0, 0, 0));
    }

    #[test]
    fn same_records_in_both_formats() {
        let opts = WeblogOptions {
            records: Some(2000),
            ..WeblogOptions::default()
        };
        let mut mp = Vec::new();
        let mut nd = Vec::new();
        let a = write_docker_nginx(&mut mp, WeblogFormat::Msgpack, &opts).unwrap();
        let b = write_docker_nginx(&mut nd, WeblogFormat::Ndjson, &opts).unwrap();
        assert_eq!(a.records, 2000);
        assert_eq!(b.records, 2000);
        assert_eq!(a.status_200, b.status_200);
        let text = String::from_utf8(nd).unwrap();
        assert_eq!(text.lines().count(), 2000);
        let mut last = 0i64;
        let mut n200 = 0;
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let t = v["log_time"].as_i64().unwrap();
            assert!(t >= last && (WEBLOG_START_MS..WEBLOG_START_MS + 3_600_000).contains(&t));
            last = t;
            assert_eq!(v["container_id"].as_str().unwrap().len(), 64);
            let log = v["log"].as_str().unwrap();
            if v["source"] == "stdout" {
                // `$time_local` is log_time truncated to the second.
                let (y, m, d, hh, mm, ss) = civil(t);
                let tl = format!(
                    "[{d:02}/{}/{y}:{hh:02}:{mm:02}:{ss:02} +0000]",
                    MONTHS[m as usize - 1]
                );
                assert!(log.contains(&tl), "{log} vs {tl}");
                if log.split('"').nth(2).unwrap().trim().starts_with("200 ") {
                    n200 += 1;
                }
            }
        }
        assert_eq!(n200, a.status_200);
        // The mix is realistic: mostly 200, some of everything else.
        assert!(n200 > 1400 && n200 < 1850, "{n200}");
    }
}
