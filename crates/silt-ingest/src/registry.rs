//! The one format registry: every format silt reads, as the [`FormatSpec`] its own crate declares
//! next to its decoder. `silt import <format>`, `silt import auto`, `silt convert`, `silt bench`
//! and the CLI's help all come from this list.
//!
//! Adding a format: write its decoder and its `FORMAT` spec in the format's own file, and add one
//! line to [`FORMATS`]. The order of the list breaks ties between sniffers that are equally sure
//! (the more specific format comes first).
//!
//! Touches nothing.

use silt_core::format::{Confidence, Probe};
use silt_core::FormatSpec;

/// Every format, most specific first (the order breaks sniffing ties).
pub static FORMATS: &[&FormatSpec] = &[
    &silt_readers::zeek::FORMAT,
    &silt_readers::suricata::FORMAT,
    &silt_pcap::FORMAT,
    &silt_flowexport::SFLOW_FORMAT,
    &silt_flowexport::NETFLOW_FORMAT,
    &silt_logs::avro::FORMAT,
    &silt_logs::docker::FORMAT,
    &silt_access::FORMAT,
    &silt_logs::syslog::FORMAT,
    &silt_logs::ltsv::FORMAT,
    &silt_logs::msgpack::FORMAT,
    &silt_logs::ndjson::FORMAT,
    &silt_logs::delimited::TSV_FORMAT,
    &silt_logs::delimited::CSV_FORMAT,
];

/// The format called `name` (or one of its aliases), case-insensitive.
pub fn find(name: &str) -> Option<&'static FormatSpec> {
    FORMATS.iter().copied().find(|f| f.is_named(name))
}

/// Like [`find`], with an error that lists the formats.
pub fn require(name: &str) -> anyhow::Result<&'static FormatSpec> {
    find(name).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown format {name:?}: silt reads {}",
            names().collect::<Vec<_>>().join(", ")
        )
    })
}

/// The names of all formats, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    FORMATS.iter().map(|f| f.name)
}

/// The format a file name's extension says (`.gz` looked through), if exactly one format
/// claims that extension.
pub fn by_extension(file_name: &str) -> Option<&'static FormatSpec> {
    let probe = Probe {
        head: &[],
        file_name: Some(file_name),
    };
    let ext = probe.extension()?;
    let mut claim = FORMATS
        .iter()
        .copied()
        .filter(|f| f.extensions.iter().any(|e| e.eq_ignore_ascii_case(&ext)));
    let first = claim.next()?;
    claim.next().is_none().then_some(first)
}

/// What content detection chose.
#[derive(Debug, Clone, Copy)]
pub struct Detected {
    pub format: &'static FormatSpec,
    pub confidence: Confidence,
}

/// The format the first bytes look most like: the highest sniffer confidence; among equals, a
/// format whose extensions include the file's, else the earlier registry entry. `None` when no
/// sniffer recognises the bytes.
pub fn detect(probe: &Probe<'_>) -> Option<Detected> {
    let ext = probe.extension();
    let claims_ext = |f: &FormatSpec| {
        ext.as_deref()
            .is_some_and(|e| f.extensions.iter().any(|x| x.eq_ignore_ascii_case(e)))
    };
    let mut best: Option<Detected> = None;
    for &f in FORMATS {
        let Some(c) = (f.sniff)(probe) else { continue };
        let better = match &best {
            None => true,
            Some(b) => {
                c > b.confidence || (c == b.confidence && claims_ext(f) && !claims_ext(b.format))
            }
        };
        if better {
            best = Some(Detected {
                format: f,
                confidence: c,
            });
        }
    }
    best
}

/// One line per format for `--help`: name, aliases, what it is.
pub fn help() -> String {
    let mut s = String::new();
    for f in FORMATS {
        let aliases = if f.aliases.is_empty() {
            String::new()
        } else {
            format!(" (also {})", f.aliases.join(", "))
        };
        s.push_str(&format!("  {:<9} {}{}\n", f.name, f.summary, aliases));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut all: Vec<String> = Vec::new();
        for f in FORMATS {
            for n in std::iter::once(&f.name).chain(f.aliases) {
                let n = n.to_ascii_lowercase();
                assert!(!all.contains(&n), "{n} is claimed twice");
                all.push(n);
            }
        }
        assert!(find("NDJSON").is_some());
        assert!(require("nope").unwrap_err().to_string().contains("zeek"));
    }

    #[test]
    fn extensions() {
        assert_eq!(by_extension("a.csv.gz").map(|f| f.name), Some("csv"));
        assert_eq!(by_extension("trace.pcapng").map(|f| f.name), Some("pcap"));
        assert_eq!(by_extension("noext"), None);
    }
}
