//! The checked-in registry of Zeek field types (used by the JSON reader) agrees with every
//! `#fields`/`#types` header of the corpus TSV logs.

mod zeek_common;

use silt_readers::zeek::registry;
use silt_readers::zeek::types::ZType;
use zeek_common::*;

#[test]
fn registry_covers_every_corpus_header() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let mut checked = 0;
    for f in files(&c.join("zeek-tsv")) {
        // Zeek's logging-framework tests log made-up records under real log names (`ssh`).
        if f.to_string_lossy()
            .contains("scripts.base.frameworks.logging.")
        {
            continue;
        }
        let data = bytes(&f);
        let text = String::from_utf8_lossy(&data);
        let mut path = String::new();
        let mut fields: Vec<String> = Vec::new();
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("#path\t") {
                path = p.to_string();
            } else if let Some(fl) = line.strip_prefix("#fields\t") {
                fields = fl.split('\t').map(str::to_string).collect();
            } else if let Some(tl) = line.strip_prefix("#types\t") {
                for (name, ty) in fields.iter().zip(tl.split('\t')) {
                    let (_, reg) = registry::log_field(&path, name).unwrap_or_else(|| {
                        panic!("{}: {path}.{name} is not in the registry", f.display())
                    });
                    assert_eq!(
                        ZType::parse(reg).arrow(),
                        ZType::parse(ty).arrow(),
                        "{}: {path}.{name}: registry {reg} vs header {ty}",
                        f.display()
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}
