//! Statement tickets and prepared-statement handles. Both are the SQL text behind a short
//! version tag (`silt1:`), opaque to clients:
//!
//! - GetFlightInfo(CommandStatementQuery) plans the SQL and answers a ticket
//!   (`TicketStatementQuery`) whose handle carries it; DoGet runs it;
//! - CreatePreparedStatement plans the SQL and answers a handle that carries it; GetFlightInfo
//!   and DoGet on `CommandPreparedStatementQuery` run it; ClosePreparedStatement has nothing to
//!   free.
//!
//! - DoPut on a prepared statement binds one row of parameter values: the answer is a new
//!   handle (`silt2:`) that carries the SQL and the values (an Arrow IPC stream), which clients
//!   use from then on (Flight SQL's stateless prepared statements).
//!
//! So the server holds no state per statement: nothing leaks when a client never closes, a
//! handle stays valid across reconnects, and any of several servers over the same lake can
//! serve a ticket. Tickets are as secret as the SQL in them, and a client sending a ticket of
//! its own making can only run SQL it could have sent anyway (with the same token check).
//!
//! Touches nothing.

use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use tonic::Status;

/// The tag in front of the SQL; another layout (say, a cached result) gets another tag.
const TAG: &[u8] = b"silt1:";
/// The tag of a handle with bound values: `silt2:`, the SQL's length (u32, little-endian), the
/// SQL, then the values as an Arrow IPC stream of one batch.
const TAG_BOUND: &[u8] = b"silt2:";

/// What a handle carries.
#[derive(Debug)]
pub struct Statement {
    pub sql: String,
    /// The bound parameter values (one row), if any were bound.
    pub params: Option<RecordBatch>,
}

/// The handle for `sql` with `params` bound.
#[allow(clippy::result_large_err)] // tonic's own error type
pub fn encode_bound(sql: &str, params: &RecordBatch) -> Result<Bytes, Status> {
    let mut out = Vec::with_capacity(TAG_BOUND.len() + 4 + sql.len() + 256);
    out.extend_from_slice(TAG_BOUND);
    let len = u32::try_from(sql.len())
        .map_err(|_| Status::invalid_argument("the statement is longer than 4 GiB"))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(sql.as_bytes());
    let mut w = StreamWriter::try_new(&mut out, &params.schema())
        .and_then(|mut w| w.write(params).and_then(|()| w.finish()));
    if let Err(e) = w.as_mut() {
        return Err(Status::invalid_argument(format!(
            "cannot encode the parameter values: {e}"
        )));
    }
    drop(w);
    Ok(out.into())
}

/// The handle (or ticket) for `sql`.
pub fn encode(sql: &str) -> Bytes {
    let mut out = Vec::with_capacity(TAG.len() + sql.len());
    out.extend_from_slice(TAG);
    out.extend_from_slice(sql.as_bytes());
    out.into()
}

/// What a handle from [`encode`] or [`encode_bound`] carries; `invalid_argument` for anything
/// else.
#[allow(clippy::result_large_err)] // tonic's own error type
pub fn decode(handle: &[u8]) -> Result<Statement, Status> {
    let utf8 = |b: &[u8]| {
        String::from_utf8(b.to_vec())
            .map_err(|_| Status::invalid_argument("statement handle is not valid UTF-8"))
    };
    if let Some(sql) = handle.strip_prefix(TAG) {
        return Ok(Statement {
            sql: utf8(sql)?,
            params: None,
        });
    }
    let bad = || Status::invalid_argument("statement handle with parameter values is damaged");
    if let Some(rest) = handle.strip_prefix(TAG_BOUND) {
        let len = rest
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(bad)?;
        let sql = rest.get(4..4 + len).ok_or_else(bad)?;
        let values = &rest[4 + len..];
        // arrow-ipc would reserve the lengths a forged or damaged handle gives (2^40 bytes
        // would abort the server: an allocation failure is not a panic).
        if silt_core::ipc_check::check_stream(values).is_err() {
            return Err(bad());
        }
        // arrow-ipc panics on some damaged schemas (an unknown type tag) instead of failing.
        let params =
            silt_core::panics::catch(|| StreamReader::try_new(values, None).ok()?.next()?.ok())
                .ok()
                .flatten()
                .ok_or_else(bad)?;
        return Ok(Statement {
            sql: utf8(sql)?,
            params: Some(params),
        });
    }
    Err(Status::invalid_argument(
        "unknown statement handle: tickets and prepared statements come from this server's \
         GetFlightInfo and CreatePreparedStatement",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for sql in ["", "SELECT 1", "SELECT 'é' -- silt1:"] {
            let st = decode(&encode(sql)).unwrap();
            assert_eq!(st.sql, sql);
            assert!(st.params.is_none());
        }
        let values = RecordBatch::try_from_iter([(
            "$1",
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![7])) as _,
        )])
        .unwrap();
        let h = encode_bound("SELECT ? -- silt2:", &values).unwrap();
        let st = decode(&h).unwrap();
        assert_eq!(st.sql, "SELECT ? -- silt2:");
        assert_eq!(st.params.unwrap(), values);
        for cut in [6, 9, 12, 40] {
            assert_eq!(
                decode(&h[..cut]).unwrap_err().code(),
                tonic::Code::InvalidArgument,
                "{cut}"
            );
        }
        // Every byte of the values changed: an error or the values, never a panic or an abort
        // (a body length of terabytes in a message header).
        let start = TAG_BOUND.len() + 4 + "SELECT ? -- silt2:".len();
        for i in start..h.len() {
            for x in [0x01u8, 0x80, 0xff, 0x4d] {
                let mut bad = h.to_vec();
                bad[i] ^= x;
                if let Err(e) = decode(&bad) {
                    assert_eq!(e.code(), tonic::Code::InvalidArgument);
                }
            }
        }
        assert_eq!(
            decode(b"SELECT 1").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            decode(b"silt1:\xff").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    /// A client may send back values of its own making, compressed: every byte of a zstd- and
    /// an LZ4-compressed value stream changed gives an error or values, never an abort (a
    /// buffer whose uncompressed length says terabytes, which arrow-ipc would reserve).
    #[test]
    fn changed_compressed_values_never_abort() {
        use arrow::ipc::writer::IpcWriteOptions;
        use arrow::ipc::CompressionType;
        let values = RecordBatch::try_from_iter([(
            "$1",
            std::sync::Arc::new(arrow::array::Int64Array::from(vec![7; 4000])) as _,
        )])
        .unwrap();
        let sql = "SELECT ?";
        for c in [CompressionType::ZSTD, CompressionType::LZ4_FRAME] {
            let mut h = TAG_BOUND.to_vec();
            h.extend_from_slice(&(sql.len() as u32).to_le_bytes());
            h.extend_from_slice(sql.as_bytes());
            let start = h.len();
            let opts = IpcWriteOptions::default()
                .try_with_compression(Some(c))
                .unwrap();
            let mut w = StreamWriter::try_new_with_options(&mut h, &values.schema(), opts).unwrap();
            w.write(&values).unwrap();
            w.finish().unwrap();
            drop(w);
            assert_eq!(decode(&h).unwrap().params.unwrap(), values, "{c:?}");
            let mut refused = 0;
            for i in start..h.len() {
                for x in [0x01u8, 0x80, 0xff, 0x4d] {
                    let mut bad = h.clone();
                    bad[i] ^= x;
                    if let Err(e) = decode(&bad) {
                        assert_eq!(e.code(), tonic::Code::InvalidArgument);
                        refused += 1;
                    }
                }
            }
            assert!(refused > 0, "{c:?}");
        }
    }
}
