//! How long a step took, as events and commands say it: `120ms` under a second, `1.4s` above,
//! so a user reading `binky remove`'s steps sees where the time went.

use std::time::Duration;

/// `7ms`, `250ms`, `1.4s`, `63.0s`.
pub fn took(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_steps_in_milliseconds_long_ones_in_seconds() {
        assert_eq!(took(Duration::from_micros(7_400)), "7ms");
        assert_eq!(took(Duration::from_millis(999)), "999ms");
        assert_eq!(took(Duration::from_millis(1_440)), "1.4s");
        assert_eq!(took(Duration::from_secs(63)), "63.0s");
    }
}
