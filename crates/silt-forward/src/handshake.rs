//! The handshake of the Forward protocol, when a shared key is configured. The server speaks
//! first:
//!
//! ```text
//!   server: ["HELO", {"nonce": bin(16), "auth": bin(16 salt, empty without users), "keepalive": true}]
//!   client: ["PING", client_hostname, shared_key_salt, hex(sha512(salt + client_hostname + nonce + shared_key)),
//!            username, hex(sha512(auth_salt + username + password))]
//!   server: ["PONG", true, "", self_hostname, hex(sha512(salt + self_hostname + nonce + shared_key))]
//!       or: ["PONG", false, reason, "", ""]   and the connection is closed
//! ```
//!
//! As fluentd's in_forward does it (the digest in PONG lets the client check the server knows
//! the key too). Digests are compared in constant time. Touches only the bytes it builds and
//! checks; the connection ([`crate::conn`]) writes them.

use sha2::{Digest, Sha512};

use crate::scan::{header, Kind};
use crate::ForwardConfig;

/// The state of one connection's handshake: the random values sent in HELO.
pub struct Handshake {
    nonce: [u8; 16],
    /// Empty when there are no users.
    auth_salt: Vec<u8>,
}

/// `hex(sha512(parts...))`, lowercase.
pub fn sha512_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha512::new();
    for p in parts {
        h.update(p);
    }
    let digest = h.finalize();
    let mut out = String::with_capacity(128);
    for b in digest.iter() {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// Writing MessagePack into a Vec cannot fail: the results of `rmp::encode` are dropped.
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    let _ = rmp::encode::write_str_len(out, s.len() as u32);
    out.extend_from_slice(s);
}

impl Handshake {
    /// Fresh random nonce (and user salt when there are users).
    pub fn new(cfg: &ForwardConfig) -> Self {
        Handshake {
            nonce: rand::random(),
            auth_salt: if cfg.users.is_empty() {
                Vec::new()
            } else {
                rand::random::<[u8; 16]>().to_vec()
            },
        }
    }

    /// The HELO message.
    pub fn helo(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        let _ = rmp::encode::write_array_len(&mut out, 2);
        put_str(&mut out, b"HELO");
        let _ = rmp::encode::write_map_len(&mut out, 3);
        put_str(&mut out, b"nonce");
        let _ = rmp::encode::write_bin(&mut out, &self.nonce);
        put_str(&mut out, b"auth");
        let _ = rmp::encode::write_bin(&mut out, &self.auth_salt);
        put_str(&mut out, b"keepalive");
        let _ = rmp::encode::write_bool(&mut out, true);
        out
    }

    /// Checks a PING frame; `Ok(pong)` to send before carrying on, `Err((reason, pong))` to send
    /// before closing.
    pub fn check_ping(
        &self,
        frame: &[u8],
        cfg: &ForwardConfig,
    ) -> Result<Vec<u8>, (String, Vec<u8>)> {
        let fail = |reason: String| {
            let mut out = Vec::with_capacity(32 + reason.len());
            let _ = rmp::encode::write_array_len(&mut out, 5);
            put_str(&mut out, b"PONG");
            let _ = rmp::encode::write_bool(&mut out, false);
            put_str(&mut out, reason.as_bytes());
            put_str(&mut out, b"");
            put_str(&mut out, b"");
            (reason, out)
        };
        let Some(fields) = ping_fields(frame) else {
            return Err(fail("invalid ping message".into()));
        };
        let [_, hostname, salt, digest, username, password] = fields;
        let key = cfg.shared_key.as_deref().unwrap_or_default().as_bytes();
        let expected = sha512_hex(&[salt, hostname, &self.nonce, key]);
        if !same(expected.as_bytes(), digest) {
            return Err(fail("shared_key mismatch".into()));
        }
        if !cfg.users.is_empty() {
            let ok = cfg.users.iter().fold(false, |ok, (user, pass)| {
                let d = sha512_hex(&[&self.auth_salt, user.as_bytes(), pass.as_bytes()]);
                ok | (user.as_bytes() == username && same(d.as_bytes(), password))
            });
            if !ok {
                return Err(fail("username/password mismatch".into()));
            }
        }
        let mut out = Vec::with_capacity(180 + cfg.self_hostname.len());
        let _ = rmp::encode::write_array_len(&mut out, 5);
        put_str(&mut out, b"PONG");
        let _ = rmp::encode::write_bool(&mut out, true);
        put_str(&mut out, b"");
        put_str(&mut out, cfg.self_hostname.as_bytes());
        let proof = sha512_hex(&[salt, cfg.self_hostname.as_bytes(), &self.nonce, key]);
        put_str(&mut out, proof.as_bytes());
        Ok(out)
    }
}

/// `["PING", hostname, salt, digest, username, password]` as raw byte strings (the last two
/// empty when a client leaves them out).
fn ping_fields(frame: &[u8]) -> Option<[&[u8]; 6]> {
    let top = header(frame).ok()??;
    if top.kind != Kind::Array || !(4..=6).contains(&top.children) {
        return None;
    }
    let mut pos = top.head;
    let mut fields: [&[u8]; 6] = [b""; 6];
    for f in fields.iter_mut().take(top.children as usize) {
        let h = header(frame.get(pos..)?).ok()??;
        if !matches!(h.kind, Kind::Str | Kind::Bin) {
            return None;
        }
        *f = frame.get(pos + h.head..pos + h.size())?;
        pos += h.size();
    }
    (fields[0] == b"PING").then_some(fields)
}

/// The client's side, for tests (and for a forward client later): the PING answering `helo`.
pub fn client_ping(
    helo: &[u8],
    client_hostname: &str,
    shared_key: &str,
    user: Option<(&str, &str)>,
) -> Option<Vec<u8>> {
    // ["HELO", {"nonce": .., "auth": .., ...}]: find the two binaries by key.
    let top = header(helo).ok()??;
    if top.kind != Kind::Array || top.children != 2 {
        return None;
    }
    let mut pos = top.head;
    let h = header(&helo[pos..]).ok()??;
    pos += h.size();
    let map = header(&helo[pos..]).ok()??;
    pos += map.head;
    let (mut nonce, mut salt): (&[u8], &[u8]) = (b"", b"");
    for _ in 0..map.children / 2 {
        let k = header(&helo[pos..]).ok()??;
        let key = helo.get(pos + k.head..pos + k.size())?;
        pos += k.size();
        let v = header(&helo[pos..]).ok()??;
        let val = helo.get(pos + v.head..pos + v.size())?;
        pos = crate::scan::skip_value(helo, pos).ok()?;
        match key {
            b"nonce" => nonce = val,
            b"auth" => salt = val,
            _ => {}
        }
    }
    let key_salt = b"0123456789abcdef";
    let mut out = Vec::new();
    let _ = rmp::encode::write_array_len(&mut out, 6);
    put_str(&mut out, b"PING");
    put_str(&mut out, client_hostname.as_bytes());
    put_str(&mut out, key_salt);
    put_str(
        &mut out,
        sha512_hex(&[
            key_salt,
            client_hostname.as_bytes(),
            nonce,
            shared_key.as_bytes(),
        ])
        .as_bytes(),
    );
    let (u, p) = user.unwrap_or(("", ""));
    put_str(&mut out, u.as_bytes());
    let pd = if user.is_some() {
        sha512_hex(&[salt, u.as_bytes(), p.as_bytes()])
    } else {
        String::new()
    };
    put_str(&mut out, pd.as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value as V;

    fn cfg(users: &[(&str, &str)]) -> ForwardConfig {
        ForwardConfig {
            shared_key: Some("secret".into()),
            self_hostname: "silt-test".into(),
            users: users
                .iter()
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect(),
            ..ForwardConfig::default()
        }
    }

    fn value(b: &[u8]) -> V {
        rmpv::decode::read_value(&mut &b[..]).unwrap()
    }

    #[test]
    fn sha512_hex_matches_a_known_digest() {
        // sha512("abc"), FIPS 180-2.
        assert!(sha512_hex(&[b"a", b"bc"]).starts_with("ddaf35a193617abacc417349ae204131"));
    }

    #[test]
    fn helo_shape() {
        let c = cfg(&[]);
        let hs = Handshake::new(&c);
        let v = value(&hs.helo());
        assert_eq!(v[0], V::from("HELO"));
        let m = v[1].as_map().unwrap();
        assert_eq!(m[0], (V::from("nonce"), V::Binary(hs.nonce.to_vec())));
        assert_eq!(m[1], (V::from("auth"), V::Binary(vec![])));
        assert_eq!(m[2], (V::from("keepalive"), V::Boolean(true)));
        assert_eq!(Handshake::new(&cfg(&[("u", "p")])).auth_salt.len(), 16);
    }

    #[test]
    fn right_key_gets_a_pong_with_the_servers_proof() {
        let c = cfg(&[]);
        let hs = Handshake::new(&c);
        let ping = client_ping(&hs.helo(), "client-a", "secret", None).unwrap();
        let pong = value(&hs.check_ping(&ping, &c).unwrap());
        assert_eq!(pong[0], V::from("PONG"));
        assert_eq!(pong[1], V::Boolean(true));
        assert_eq!(pong[3], V::from("silt-test"));
        let proof = sha512_hex(&[b"0123456789abcdef", b"silt-test", &hs.nonce, b"secret"]);
        assert_eq!(pong[4], V::from(proof.as_str()));
    }

    #[test]
    fn wrong_key_wrong_user_garbage() {
        let c = cfg(&[("alice", "pw1"), ("bob", "pw2")]);
        let hs = Handshake::new(&c);
        let helo = hs.helo();
        let ok = client_ping(&helo, "h", "secret", Some(("bob", "pw2"))).unwrap();
        assert!(hs.check_ping(&ok, &c).is_ok());
        for (ping, why) in [
            (
                client_ping(&helo, "h", "nope", Some(("bob", "pw2"))).unwrap(),
                "shared_key mismatch",
            ),
            (
                client_ping(&helo, "h", "secret", Some(("bob", "pw1"))).unwrap(),
                "username/password mismatch",
            ),
            (
                client_ping(&helo, "h", "secret", Some(("carol", "pw1"))).unwrap(),
                "username/password mismatch",
            ),
            (
                client_ping(&helo, "h", "secret", None).unwrap(),
                "username/password mismatch",
            ),
            (
                vec![0x91, 0xa4, b'P', b'I', b'N', b'G'],
                "invalid ping message",
            ),
            (vec![0xc0], "invalid ping message"),
        ] {
            let (reason, pong) = hs.check_ping(&ping, &c).unwrap_err();
            assert_eq!(reason, why);
            let pong = value(&pong);
            assert_eq!(pong[1], V::Boolean(false));
            assert_eq!(pong[2], V::from(why));
        }
    }
}
