//! The on-disk layout of an index file (see FORMAT.md): header, blocks, dictionary, block
//! index, footer; varints; block payload encoding and parsing.
//!
//! Pure encoding/decoding over byte slices; touches no file.

use crate::template::Key;

/// First 8 bytes of an index file.
pub const HEADER_MAGIC: &[u8; 8] = b"SILTRDNS";
/// First 8 bytes of the footer (the last [`FOOTER_LEN`] bytes of the file).
pub const FOOTER_MAGIC: &[u8; 8] = b"RDNSFOOT";
/// Format version written and accepted.
pub const VERSION: u32 = 1;
/// Header: magic, version u32, reserved u32.
pub const HEADER_LEN: usize = 16;
/// Footer: magic (8), version (4), block_entries (4), 13 u64 fields (104), meta crc (4),
/// footer crc (4).
pub const FOOTER_LEN: usize = 8 + 4 + 4 + 13 * 8 + 4 + 4;
/// Block header: crc32 of (raw_len ‖ frame) (4), raw_len u32 (4); then the zstd frame.
pub const BLOCK_HEADER_LEN: usize = 8;
/// Largest decompressed block payload accepted (guards allocations on a damaged file).
pub const MAX_RAW_BLOCK: usize = 16 << 20;

/// The footer: where every part is and how many entries there are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footer {
    pub block_entries: u32,
    pub v4_count: u64,
    pub v6_count: u64,
    pub v4_blocks: u64,
    pub v6_blocks: u64,
    /// Start of the IPv4 blocks (= HEADER_LEN).
    pub v4_data_off: u64,
    /// Start of the IPv6 blocks (= end of the IPv4 blocks).
    pub v6_data_off: u64,
    /// Start of the dictionary (= end of the IPv6 blocks).
    pub dict_off: u64,
    pub dict_len: u64,
    /// IPv4 block index: `v4_blocks` first keys (u32 LE), `v4_blocks` last keys (u32 LE),
    /// then `v4_blocks + 1` block offsets (u64 LE; the last one is the end of the section).
    pub v4_index_off: u64,
    /// IPv6 block index: the same with u128 keys.
    pub v6_index_off: u64,
    /// Offset of the footer (= end of the IPv6 block index).
    pub footer_off: u64,
    /// Length of the whole file.
    pub file_len: u64,
    /// Reserved (0).
    pub reserved: u64,
    /// crc32 of header ‖ dictionary ‖ both block indexes.
    pub meta_crc: u32,
}

impl Footer {
    pub fn to_bytes(&self) -> [u8; FOOTER_LEN] {
        let mut b = Vec::with_capacity(FOOTER_LEN);
        b.extend_from_slice(FOOTER_MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&self.block_entries.to_le_bytes());
        for v in [
            self.v4_count,
            self.v6_count,
            self.v4_blocks,
            self.v6_blocks,
            self.v4_data_off,
            self.v6_data_off,
            self.dict_off,
            self.dict_len,
            self.v4_index_off,
            self.v6_index_off,
            self.footer_off,
            self.file_len,
            self.reserved,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.meta_crc.to_le_bytes());
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&b);
        out
    }

    /// Parses and checks a footer; the error says what is wrong.
    pub fn parse(b: &[u8]) -> Result<Footer, String> {
        if b.len() != FOOTER_LEN {
            return Err(format!(
                "footer is {} bytes, expected {FOOTER_LEN}",
                b.len()
            ));
        }
        if &b[..8] != FOOTER_MAGIC {
            return Err(
                "no footer magic at the end of the file: the file is truncated or is not \
                        a silt rdns index"
                    .into(),
            );
        }
        let crc = u32::from_le_bytes(b[FOOTER_LEN - 4..].try_into().map_err(|_| "footer")?);
        if crc32fast::hash(&b[..FOOTER_LEN - 4]) != crc {
            return Err("footer checksum mismatch: the file is damaged".into());
        }
        let version = le_u32(b, 8);
        if version != VERSION {
            return Err(format!(
                "format version {version}, this build reads version {VERSION}: rebuild the index"
            ));
        }
        let u = |i: usize| le_u64(b, 16 + 8 * i);
        Ok(Footer {
            block_entries: le_u32(b, 12),
            v4_count: u(0),
            v6_count: u(1),
            v4_blocks: u(2),
            v6_blocks: u(3),
            v4_data_off: u(4),
            v6_data_off: u(5),
            dict_off: u(6),
            dict_len: u(7),
            v4_index_off: u(8),
            v6_index_off: u(9),
            footer_off: u(10),
            file_len: u(11),
            reserved: u(12),
            meta_crc: le_u32(b, FOOTER_LEN - 8),
        })
    }
}

/// Little-endian u32 at `off`; callers check bounds (returns 0 past the end, never panics).
pub fn le_u32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

/// Little-endian u64 at `off` (0 past the end).
pub fn le_u64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// Little-endian u128 at `off` (0 past the end).
pub fn le_u128(b: &[u8], off: usize) -> u128 {
    b.get(off..off + 16)
        .and_then(|s| s.try_into().ok())
        .map(u128::from_le_bytes)
        .unwrap_or(0)
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`; `None` when it runs past the end or overflows 128 bits.
#[inline]
pub fn get_varint(b: &[u8], pos: &mut usize) -> Option<u128> {
    // Fast path: one or two bytes (nearly all deltas and name lengths).
    let b0 = *b.get(*pos)?;
    if b0 < 0x80 {
        *pos += 1;
        return Some(u128::from(b0));
    }
    if let Some(&b1) = b.get(*pos + 1) {
        if b1 < 0x80 {
            *pos += 2;
            return Some(u128::from(b0 & 0x7f) | (u128::from(b1) << 7));
        }
    }
    get_varint_slow(b, pos)
}

fn get_varint_slow(b: &[u8], pos: &mut usize) -> Option<u128> {
    let mut v: u128 = 0;
    let mut shift = 0u32;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift >= 128 || (shift == 126 && byte > 3) {
            return None;
        }
        v |= u128::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

pub fn key_value(k: Key) -> u128 {
    match k {
        Key::V4(v) => u128::from(v),
        Key::V6(v) => v,
    }
}

/// Builds the raw payload of a block: `n` varint, `n-1` key deltas, `n` name lengths, names.
/// `keys` are strictly increasing; `names` are template-encoded.
pub struct BlockBuilder {
    pub first: Option<u128>,
    last: u128,
    n: usize,
    deltas: Vec<u8>,
    lens: Vec<u8>,
    names: Vec<u8>,
}

impl BlockBuilder {
    pub fn new() -> Self {
        BlockBuilder {
            first: None,
            last: 0,
            n: 0,
            deltas: Vec::new(),
            lens: Vec::new(),
            names: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The last key pushed.
    pub fn last(&self) -> u128 {
        self.last
    }

    pub fn push(&mut self, key: u128, enc_name: &[u8]) {
        if self.first.is_none() {
            self.first = Some(key);
        } else {
            put_varint(&mut self.deltas, key - self.last);
        }
        self.last = key;
        self.n += 1;
        put_varint(&mut self.lens, enc_name.len() as u128);
        self.names.extend_from_slice(enc_name);
    }

    /// Writes the payload into `out` (cleared) and resets the builder.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.clear();
        put_varint(out, self.n as u128);
        out.extend_from_slice(&self.deltas);
        out.extend_from_slice(&self.lens);
        out.extend_from_slice(&self.names);
        self.first = None;
        self.n = 0;
        self.deltas.clear();
        self.lens.clear();
        self.names.clear();
    }
}

impl Default for BlockBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// Finds `key` in a raw block payload whose first key is `first`. Returns the encoded name, or
/// `Ok(None)` when absent; `Err` describes a malformed payload.
pub fn find_in_payload(payload: &[u8], first: u128, key: u128) -> Result<Option<&[u8]>, String> {
    let mut pos = 0;
    let n = get_varint(payload, &mut pos).ok_or("block entry count unreadable")? as usize;
    if n == 0 || n > payload.len() {
        return Err(format!(
            "block entry count {n} is impossible for a {}-byte payload",
            payload.len()
        ));
    }
    // Walk the deltas to the key's position.
    let mut cur = first;
    let mut idx = if cur == key { Some(0) } else { None };
    let mut i = 1;
    while i < n {
        let d = get_varint(payload, &mut pos).ok_or("key delta unreadable")?;
        if idx.is_none() {
            cur = cur.checked_add(d).ok_or("key delta overflows")?;
            if cur == key {
                idx = Some(i);
            } else if cur > key {
                // Keys are increasing: absent. Skip the rest cheaply only if not needed.
                return Ok(None);
            }
        }
        i += 1;
    }
    let Some(idx) = idx else { return Ok(None) };
    let mut off = 0usize;
    let mut len = 0usize;
    for j in 0..n {
        let l = get_varint(payload, &mut pos).ok_or("name length unreadable")? as usize;
        if j < idx {
            off = off.checked_add(l).ok_or("name offset overflows")?;
        } else if j == idx {
            len = l;
        }
    }
    let start = pos.checked_add(off).ok_or("name offset overflows")?;
    payload
        .get(start..start.saturating_add(len))
        .map(Some)
        .ok_or_else(|| "name runs past the end of the block".to_string())
}

/// Decodes every entry of a payload (for verification and tests): (key, encoded name).
pub fn entries_of_payload(payload: &[u8], first: u128) -> Result<Vec<(u128, &[u8])>, String> {
    let mut pos = 0;
    let n = get_varint(payload, &mut pos).ok_or("block entry count unreadable")? as usize;
    if n == 0 || n > payload.len() {
        return Err(format!("block entry count {n} is impossible"));
    }
    let mut keys = Vec::with_capacity(n);
    let mut cur = first;
    keys.push(cur);
    for _ in 1..n {
        let d = get_varint(payload, &mut pos).ok_or("key delta unreadable")?;
        cur = cur.checked_add(d).ok_or("key delta overflows")?;
        keys.push(cur);
    }
    let mut lens = Vec::with_capacity(n);
    for _ in 0..n {
        lens.push(get_varint(payload, &mut pos).ok_or("name length unreadable")? as usize);
    }
    let mut out = Vec::with_capacity(n);
    for (k, l) in keys.into_iter().zip(lens) {
        let name = payload
            .get(pos..pos.saturating_add(l))
            .ok_or("name past the end")?;
        pos += l;
        out.push((k, name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip() {
        for v in [0u128, 1, 127, 128, 300, u32::MAX as u128, u128::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut p = 0;
            assert_eq!(get_varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        assert_eq!(get_varint(&[0x80], &mut 0), None);
        assert_eq!(get_varint(&[0xff; 20], &mut 0), None);
    }

    #[test]
    fn block_find() {
        let mut bb = BlockBuilder::new();
        bb.push(10, b"a");
        bb.push(11, b"bb");
        bb.push(20, b"");
        bb.push(1000, b"dddd");
        let mut p = Vec::new();
        bb.finish(&mut p);
        assert_eq!(find_in_payload(&p, 10, 10).unwrap(), Some(&b"a"[..]));
        assert_eq!(find_in_payload(&p, 10, 11).unwrap(), Some(&b"bb"[..]));
        assert_eq!(find_in_payload(&p, 10, 20).unwrap(), Some(&b""[..]));
        assert_eq!(find_in_payload(&p, 10, 1000).unwrap(), Some(&b"dddd"[..]));
        assert_eq!(find_in_payload(&p, 10, 12).unwrap(), None);
        assert_eq!(find_in_payload(&p, 10, 1001).unwrap(), None);
        assert_eq!(entries_of_payload(&p, 10).unwrap().len(), 4);
        // Truncated payloads give errors, not panics.
        for cut in 0..p.len() {
            let _ = find_in_payload(&p[..cut], 10, 1000);
            let _ = entries_of_payload(&p[..cut], 10);
        }
    }

    #[test]
    fn footer_roundtrip() {
        let f = Footer {
            v4_count: 5,
            file_len: 99,
            meta_crc: 7,
            ..Default::default()
        };
        let b = f.to_bytes();
        assert_eq!(Footer::parse(&b).unwrap(), f);
        let mut bad = b;
        bad[20] ^= 1;
        assert!(Footer::parse(&bad).is_err());
    }
}
