//! Authentication: one shared token. When the server has a token, every call (Handshake
//! included) must carry it in the `authorization` metadata, as
//!
//! - `Bearer <token>`: what ADBC (`adbc.flight.sql.authorization_header`), `arrow-flight`'s
//!   client (`set_token`) and most clients send; or
//! - `Basic base64(<any user>:<token>)`: for clients that only know user and password (JDBC's
//!   `user=`/`password=`): the password is the token, the user name is not checked.
//!
//! Anything else is refused with `unauthenticated` and a message that says how to pass the
//! token. Handshake (what JDBC and ADBC run first when given user and password) then answers
//! with the token as payload and `authorization: Bearer <token>` in its response metadata, so
//! such clients carry on with the bearer token. Without a token every call is let through and
//! Handshake answers an empty payload.
//!
//! Touches nothing but the request's metadata.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The metadata key (HTTP/2 header) carrying the credentials.
pub const AUTHORIZATION: &str = "authorization";

/// The interceptor run before every call: checks the token when the server has one. Its
/// `Debug` does not show the token.
#[derive(Clone)]
pub struct TokenCheck {
    token: Option<String>,
}

impl TokenCheck {
    /// A check for `token`; `None` lets every call through.
    pub fn new(token: Option<String>) -> Self {
        TokenCheck { token }
    }

    /// Checks the credentials in `metadata` against the token.
    #[allow(clippy::result_large_err)] // tonic's own error type
    pub fn check(&self, metadata: &MetadataMap) -> Result<(), Status> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let Some(value) = metadata.get(AUTHORIZATION) else {
            return Err(Status::unauthenticated(
                "this server requires a token: pass the metadata (header) \
                 `authorization: Bearer <token>` with every call",
            ));
        };
        let value = value.to_str().unwrap_or("");
        let presented = if let Some(bearer) = strip_scheme(value, "Bearer") {
            Some(bearer.trim().as_bytes().to_vec())
        } else if let Some(basic) = strip_scheme(value, "Basic") {
            basic_password(basic.trim())
        } else {
            None
        };
        match presented {
            Some(p) if constant_time_eq(&p, token.as_bytes()) => Ok(()),
            Some(_) => Err(Status::unauthenticated(
                "wrong token: pass the server's token as `authorization: Bearer <token>`",
            )),
            None => Err(Status::unauthenticated(
                "unrecognised `authorization` metadata: pass the server's token as \
                 `authorization: Bearer <token>`",
            )),
        }
    }

    /// The metadata a successful Handshake answers with: `authorization: Bearer <token>`.
    pub fn handshake_metadata(&self) -> Option<AsciiMetadataValue> {
        let token = self.token.as_ref()?;
        format!("Bearer {token}").parse().ok()
    }

    /// The Handshake payload: the token (empty without one).
    pub fn handshake_payload(&self) -> Vec<u8> {
        self.token.clone().unwrap_or_default().into_bytes()
    }
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCheck")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Interceptor for TokenCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(request.metadata())?;
        Ok(request)
    }
}

/// `value` without its `scheme ` prefix (the scheme is case-insensitive, as in HTTP).
fn strip_scheme<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let head = value.get(..scheme.len())?;
    let rest = &value[scheme.len()..];
    (head.eq_ignore_ascii_case(scheme) && rest.starts_with(' ')).then_some(rest)
}

/// Standard base64, with or without padding.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .ok()
}

/// The password of a `Basic` credential (`base64(user:password)`).
fn basic_password(b64: &str) -> Option<Vec<u8>> {
    let decoded = base64_decode(b64)?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some(decoded[colon + 1..].to_vec())
}

/// Compares without stopping at the first difference, so timing does not reveal how much of
/// the token matched (the length may show; it is not secret enough to matter).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(value: Option<&str>) -> MetadataMap {
        let mut m = MetadataMap::new();
        if let Some(v) = value {
            m.insert(AUTHORIZATION, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn no_token_lets_everything_through() {
        let check = TokenCheck::new(None);
        assert!(check.check(&md(None)).is_ok());
        assert!(check.check(&md(Some("Bearer x"))).is_ok());
    }

    #[test]
    fn bearer_and_basic() {
        let check = TokenCheck::new(Some("s3cret".into()));
        assert!(check.check(&md(Some("Bearer s3cret"))).is_ok());
        assert!(check.check(&md(Some("bearer s3cret"))).is_ok());
        // base64("jdbc:s3cret")
        assert!(check.check(&md(Some("Basic amRiYzpzM2NyZXQ="))).is_ok());
        // base64("jdbc:wrong")
        assert!(check.check(&md(Some("Basic amRiYzp3cm9uZw=="))).is_err());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("s3cret"),
        ] {
            let err = check.check(&md(bad)).unwrap_err();
            assert_eq!(err.code(), tonic::Code::Unauthenticated, "{bad:?}");
            assert!(
                err.message().contains("Bearer <token>"),
                "{}",
                err.message()
            );
        }
    }

    #[test]
    fn debug_hides_the_token() {
        let check = TokenCheck::new(Some("s3cret".into()));
        assert!(!format!("{check:?}").contains("s3cret"));
        let cfg = crate::FlightConfig {
            token: Some("s3cret".into()),
            ..Default::default()
        };
        assert!(!format!("{cfg:?}").contains("s3cret"));
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("YWRtaW46cGFzcw==").unwrap(), b"admin:pass");
        assert_eq!(base64_decode("YWRtaW46cGFzcw").unwrap(), b"admin:pass");
        assert!(base64_decode("a!b").is_none());
    }

    #[test]
    fn constant_time() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
