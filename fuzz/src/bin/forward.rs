//! Fuzz target `forward`: fluentd's Forward protocol, a whole connection (see
//! `silt_forward::fuzz`), then each accepted frame's entries through the `msgpack` decoder as
//! `silt serve` decodes them (`silt_ingest::fuzz::check_entries`). Run by `bench/fuzz.sh`.
fn main() {
    afl::fuzz!(|data: &[u8]| {
        for f in silt_forward::fuzz::run(data).frames {
            silt_ingest::fuzz::check_entries(&f.entries, f.events);
        }
    });
}
