//! Statement tickets and prepared-statement handles. Both are the SQL text behind a short
//! version tag (`silt1:`), opaque to clients:
//!
//! - GetFlightInfo(CommandStatementQuery) plans the SQL and answers a ticket
//!   (`TicketStatementQuery`) whose handle carries it; DoGet runs it;
//! - CreatePreparedStatement plans the SQL and answers a handle that carries it; GetFlightInfo
//!   and DoGet on `CommandPreparedStatementQuery` run it; ClosePreparedStatement has nothing to
//!   free.
//!
//! So the server holds no state per statement: nothing leaks when a client never closes, a
//! handle stays valid across reconnects, and any of several servers over the same lake can
//! serve a ticket. Tickets are as secret as the SQL in them, and a client sending a ticket of
//! its own making can only run SQL it could have sent anyway (with the same token check).
//!
//! Touches nothing.

use bytes::Bytes;
use tonic::Status;

/// The tag in front of the SQL; another layout (say, a cached result) gets another tag.
const TAG: &[u8] = b"silt1:";

/// The handle (or ticket) for `sql`.
pub fn encode(sql: &str) -> Bytes {
    let mut out = Vec::with_capacity(TAG.len() + sql.len());
    out.extend_from_slice(TAG);
    out.extend_from_slice(sql.as_bytes());
    out.into()
}

/// The SQL a handle from [`encode`] carries; `invalid_argument` for anything else.
#[allow(clippy::result_large_err)] // tonic's own error type
pub fn decode(handle: &[u8]) -> Result<String, Status> {
    let sql = handle.strip_prefix(TAG).ok_or_else(|| {
        Status::invalid_argument(
            "unknown statement handle: tickets and prepared statements come from this server's \
             GetFlightInfo and CreatePreparedStatement",
        )
    })?;
    String::from_utf8(sql.to_vec())
        .map_err(|_| Status::invalid_argument("statement handle is not valid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for sql in ["", "SELECT 1", "SELECT 'é' -- silt1:"] {
            assert_eq!(decode(&encode(sql)).unwrap(), sql);
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
}
