//! Web server access logs for silt: nginx `log_format` strings, Apache `LogFormat` strings and
//! the common/combined presets, compiled into a fast hand-written matcher
//! ([`format`](mod@format)), turned into typed Arrow columns ([`columns`]), read from files as
//! tables `access.<stem>` ([`reader`]: the feedable [`AccessDecoder`] and the format spec
//! [`FORMAT`], `silt import access`), or parsed out of a string column of another format's
//! records ([`parse_field`]: the [`ParseField`] transform, `--parse-field log=access` on
//! Docker/fluentd logs).
//!
//! Depends only on `silt-core`; touches only the bytes, batches and [`silt_core::Emit`]s it is
//! given. Column names and parse rules are documented in `docs/access.md`.

pub mod columns;
pub mod format;
pub mod parse_field;
pub mod reader;

pub use format::LogFormat;
pub use parse_field::{ParseField, ParseFieldSpec};
pub use reader::{read, AccessDecoder, AccessOptions, FORMAT};
