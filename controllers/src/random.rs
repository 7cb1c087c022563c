//! Random values for secrets, from the kernel (`getrandom(2)` through the `getrandom`
//! crate): slice and managed-server passwords, golden templates' passwords, the dashboard's
//! sign-in tokens and sessions, the local CA's serial numbers.
//!
//! # Guarantees
//! - Every byte comes from the operating system's CSPRNG; there is no fallback (no clock,
//!   no pid): when the kernel cannot give randomness the caller gets [`RandomError`] and
//!   makes no secret.

/// The kernel gave no random bytes.
#[derive(Debug, thiserror::Error)]
#[error("the kernel's random number generator failed ({0}); binky makes no secret without it")]
pub struct RandomError(getrandom::Error);

/// `N` random bytes.
pub fn bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(RandomError)?;
    Ok(buf)
}

/// `n` random bytes as lower-case hex (`2 * n` characters).
pub fn hex(n: usize) -> Result<String, RandomError> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(RandomError)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_random_and_of_the_asked_length() {
        let a = hex(18).unwrap();
        assert_eq!(a.len(), 36);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_ne!(a, hex(18).unwrap());
        assert_ne!(bytes::<16>().unwrap(), bytes::<16>().unwrap());
    }
}
