//! Fuzz target `netflow`: see `silt_ingest::fuzz` (the harness) and `bench/fuzz.sh` (how to run it).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        silt_ingest::fuzz::run_named("netflow", data);
    });
}
