//! Text made safe for the screen, and short figures.

/// `s` without anything a terminal would act on: escape sequences (colours, cursor moves,
/// titles) are dropped, tabs become spaces, other control characters are dropped. A
/// service's output is drawn inside the table's frame: one `ESC [2J` in a log would
/// otherwise clear the screen of whoever watches it.
pub(super) fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates, up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS, and the like: up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(c) = chars.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // A two-character sequence (`ESC 7`, `ESC =`); a lone ESC at the end.
                _ => {}
            },
            '\t' => {
                let to = 4 - out.chars().count() % 4;
                out.extend(std::iter::repeat_n(' ', to));
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `45s`, `12m`, `3h`, `2d`.
pub(super) fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Memory in a short form: `812K`, `41M`, `1.2G`.
pub(super) fn mem(bytes: u64) -> String {
    const K: u64 = 1024;
    match bytes {
        0..K => format!("{bytes}B"),
        K..0x10_0000 => format!("{}K", bytes / K),
        0x10_0000..0x4000_0000 => format!("{}M", bytes / (K * K)),
        _ => format!("{:.1}G", bytes as f64 / (K * K * K) as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_never_reach_the_screen() {
        assert_eq!(clean("\x1b[31mred\x1b[0m text"), "red text");
        assert_eq!(clean("a\x1b[2J\x1b[Hb"), "ab");
        assert_eq!(clean("\x1b]0;title\x07after"), "after");
        assert_eq!(clean("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), "link");
        assert_eq!(clean("bell\x07 cr\r nul\0"), "bell cr nul");
        assert_eq!(clean("a\tb"), "a   b");
        assert_eq!(clean("trailing\x1b"), "trailing");
        assert_eq!(clean("ünïcødé ✓"), "ünïcødé ✓");
    }

    #[test]
    fn ages_and_memory_read_short() {
        assert_eq!(age(5_000), "5s");
        assert_eq!(age(125_000), "2m");
        assert_eq!(age(3 * 3_600_000), "3h");
        assert_eq!(age(49 * 3_600_000), "2d");
        assert_eq!(age(-4), "0s");
        assert_eq!(mem(512), "512B");
        assert_eq!(mem(40 * 1024), "40K");
        assert_eq!(mem(41 * 1024 * 1024), "41M");
        assert_eq!(mem(1288490189), "1.2G");
    }
}
