//! Collection-scoped API tokens: an HS256 JWT signed with the server's key.

use super::*;

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Base64url without padding (RFC 7515's encoding for JWTs).
pub(super) fn base64url(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A JWT for Qdrant's RBAC, signed HS256 with the server's API key: read-write on
/// `collection` only, expiring at `exp` (seconds since the epoch).
pub fn collection_token(api_key: &str, collection: &str, exp: u64) -> String {
    let header = r#"{"alg":"HS256","typ":"JWT"}"#;
    // Written by hand so the bytes (and so the token) never depend on a map's order.
    let claims = format!(
        r#"{{"access":[{{"collection":{},"access":"rw"}}],"exp":{exp}}}"#,
        serde_json::Value::String(collection.to_owned())
    );
    let signing_input = format!(
        "{}.{}",
        base64url(header.as_bytes()),
        base64url(claims.as_bytes())
    );
    let signature = hmac_sha256(api_key.as_bytes(), signing_input.as_bytes());
    format!("{signing_input}.{}", base64url(&signature))
}
