//! Output ordering: generated records are written in the order a sensor would write them (by
//! write time: Zeek writes conn.log when a connection's state is removed, Suricata writes a flow
//! event at flow timeout), while each record carries its own event time. This reproduces real
//! logs' slight `ts` disorder.
//!
//! Touches only the [`Write`] sinks it is handed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::Write;

struct Item {
    at: i64,
    seq: u64,
    sink: u8,
    buf: Vec<u8>,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    // Reversed: BinaryHeap is a max-heap and the earliest write time must come out first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// Per-sink statistics.
#[derive(Default, Clone, Copy, Debug)]
pub struct SinkStats {
    pub records: u64,
    pub bytes: u64,
    pub last_write: i64,
}

/// Records waiting for their write time, and the sinks they go to.
pub struct Pending<'a> {
    heap: BinaryHeap<Item>,
    pool: Vec<Vec<u8>>,
    seq: u64,
    pub sinks: Vec<Option<&'a mut dyn Write>>,
    pub stats: Vec<SinkStats>,
}

impl<'a> Pending<'a> {
    pub fn new(sinks: Vec<Option<&'a mut dyn Write>>) -> Self {
        let n = sinks.len();
        Pending {
            heap: BinaryHeap::new(),
            pool: Vec::new(),
            seq: 0,
            sinks,
            stats: vec![SinkStats::default(); n],
        }
    }

    /// A cleared buffer to format one record into (reused to avoid an allocation per row).
    pub fn buf(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(|| Vec::with_capacity(256))
    }

    /// Queues a formatted record for `sink`, to be written at `at`.
    pub fn push(&mut self, sink: usize, at: i64, buf: Vec<u8>) {
        self.seq += 1;
        self.heap.push(Item {
            at,
            seq: self.seq,
            sink: sink as u8,
            buf,
        });
    }

    /// Writes every record whose write time is at or before `until`.
    pub fn flush_until(&mut self, until: i64) -> std::io::Result<()> {
        while let Some(top) = self.heap.peek() {
            if top.at > until {
                break;
            }
            let Some(mut it) = self.heap.pop() else { break };
            let s = it.sink as usize;
            if let Some(w) = self.sinks[s].as_mut() {
                w.write_all(&it.buf)?;
            }
            let st = &mut self.stats[s];
            st.records += 1;
            st.bytes += it.buf.len() as u64;
            st.last_write = st.last_write.max(it.at);
            it.buf.clear();
            if self.pool.len() < 4096 {
                self.pool.push(it.buf);
            }
        }
        Ok(())
    }

    pub fn flush_all(&mut self) -> std::io::Result<()> {
        self.flush_until(i64::MAX)
    }
}
