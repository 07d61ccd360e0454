//! File identity: what tells a followed file apart from every other file, across renames and
//! restarts, and what a consumer saves to resume.
//!
//! A [`FileId`] is the device and inode of the file plus a fingerprint of its first bytes. The
//! device and inode follow the file through renames (logrotate, Zeek's rotation) and stay
//! reserved while the tailer holds the file open; the fingerprint catches the one case they
//! cannot: after a restart, an inode freed by a deleted log and reused by a new file.
//!
//! The fingerprint covers the first `min(size, 1 KiB)` bytes as the file was when it was first
//! seen with a complete line (or 1 KiB) in it, and records how many bytes that was, so it can be
//! checked again later however much the file has grown: the top [`LEN_BITS`] bits hold the
//! length, the rest a 64-bit FNV-1a hash of those bytes folded to 53 bits. FNV-1a is written out
//! here (no hashing dependency) and, unlike `std`'s hasher, never changes between Rust releases,
//! so saved checkpoints stay valid.
//!
//! Touches nothing but the files it is asked to fingerprint (one positioned read each).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Most bytes a fingerprint covers.
pub const FINGERPRINT_BYTES: usize = 1024;
/// Bits of a fingerprint that hold the number of bytes it covers (0..=1024 fits in 11).
pub const LEN_BITS: u32 = 11;
const HASH_BITS: u32 = 64 - LEN_BITS;

/// Identity of a followed file: device + inode, plus a fingerprint of its first bytes (see the
/// module documentation) to detect inode reuse. The key a consumer should use for a stream: the
/// path of a stream may change (a followed file renamed), its id does not.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub fingerprint: u64,
}

/// What a consumer saves with its data and passes back on restart: the stream, where it was
/// last known, and the end of the last data the consumer made durable (normally the `end` of
/// the last [`crate::TailEvent::Data`] it stored).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TailCheckpoint {
    pub id: FileId,
    pub path: PathBuf,
    pub offset: u64,
}

/// The fingerprint of `prefix` (at most [`FINGERPRINT_BYTES`] are used).
pub fn fingerprint_of(prefix: &[u8]) -> u64 {
    let prefix = &prefix[..prefix.len().min(FINGERPRINT_BYTES)];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in prefix {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Fold the high bits in so the truncation keeps all of the hash's entropy.
    let folded = (h ^ (h >> HASH_BITS)) & ((1u64 << HASH_BITS) - 1);
    ((prefix.len() as u64) << HASH_BITS) | folded
}

/// How many leading bytes `fingerprint` covers.
pub fn fingerprint_len(fingerprint: u64) -> usize {
    ((fingerprint >> HASH_BITS) as usize).min(FINGERPRINT_BYTES)
}

/// Reads up to `len` bytes from the start of `file` (fewer only at end of file).
pub fn read_prefix(file: &File, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// Whether the content of `file` still starts with the bytes `fingerprint` was taken from.
pub fn fingerprint_matches(file: &File, fingerprint: u64) -> io::Result<bool> {
    let len = fingerprint_len(fingerprint);
    let prefix = read_prefix(file, len)?;
    Ok(prefix.len() == len && fingerprint_of(&prefix) == fingerprint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_records_its_length() {
        assert_eq!(fingerprint_len(fingerprint_of(b"")), 0);
        assert_eq!(fingerprint_len(fingerprint_of(b"abc\n")), 4);
        assert_eq!(
            fingerprint_len(fingerprint_of(&[7u8; 5000])),
            FINGERPRINT_BYTES
        );
        assert_ne!(fingerprint_of(b"abc\n"), fingerprint_of(b"abd\n"));
        assert_ne!(fingerprint_of(b"abc"), fingerprint_of(b"abc\0"));
    }

    #[test]
    fn fingerprint_survives_growth() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"first line\n").unwrap();
        let fp = fingerprint_of(&std::fs::read(&path).unwrap());
        std::fs::write(&path, b"first line\nsecond line\n").unwrap();
        let f = File::open(&path).unwrap();
        assert!(fingerprint_matches(&f, fp).unwrap());
        std::fs::write(&path, b"other line\nsecond line\n").unwrap();
        assert!(!fingerprint_matches(&f, fp).unwrap());
        std::fs::write(&path, b"first").unwrap();
        assert!(!fingerprint_matches(&f, fp).unwrap());
    }
}
