//! Collection-scoped API tokens: an HS256 JWT signed with the server's key.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // `new_from_slice` takes a key of any length (a longer one is hashed first).
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC takes a key of any length");
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Base64url without padding (RFC 7515's encoding for JWTs).
pub(super) fn base64url(input: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(input)
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
