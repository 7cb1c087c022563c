//! The log pane's source: the end of a service's log file, followed as it grows.
//!
//! The file is what `binky logs` prints: the service's output as its scrubber wrote it, with
//! credentials already replaced by `[secret]` (`crate::scrub`). Each line is made safe for
//! the screen ([`super::text::clean`]).

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use super::text;

/// The last lines of one log file.
pub(super) struct Tail {
    path: PathBuf,
    /// How far the file has been read.
    offset: u64,
    /// A line not ended yet.
    partial: String,
    /// The lines kept, oldest first.
    pub lines: VecDeque<String>,
    keep: usize,
}

impl Tail {
    /// The last `keep` lines of `path` (none while it does not exist).
    pub fn open(path: PathBuf, keep: usize) -> Tail {
        let (lines, offset) = crate::view::log_tail_to_follow(&path, keep);
        Tail {
            lines: lines.iter().map(|l| text::clean(l)).collect(),
            path,
            offset,
            partial: String::new(),
            keep,
        }
    }

    /// The file it follows.
    pub fn path(&self) -> &PathBuf {
        &self.path
    }

    /// Read what was appended since; whether any line came.
    pub fn poll(&mut self) -> bool {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return false;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Truncated or replaced: read it again from the start.
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset {
            return false;
        }
        // At most the last 256 KiB of a burst: the pane shows a screenful.
        let from = self.offset.max(len.saturating_sub(256 * 1024));
        if from > self.offset {
            self.partial.clear();
        }
        if f.seek(SeekFrom::Start(from)).is_err() {
            return false;
        }
        let mut buf = Vec::new();
        if f.take(len - from).read_to_end(&mut buf).is_err() {
            return false;
        }
        self.offset = from + buf.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        let mut came = false;
        while let Some(nl) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=nl).collect();
            self.lines
                .push_back(text::clean(line.trim_end_matches(['\n', '\r'])));
            came = true;
        }
        while self.lines.len() > self.keep {
            self.lines.pop_front();
        }
        came
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn follows_appends_partial_lines_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.log");
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        let mut t = Tail::open(path.clone(), 2);
        assert_eq!(t.lines, ["two", "three"]);
        assert!(!t.poll());

        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "four\nfi").unwrap();
        assert!(t.poll());
        assert_eq!(t.lines, ["three", "four"]);
        writeln!(f, "ve \x1b[32mgreen\x1b[0m").unwrap();
        assert!(t.poll());
        assert_eq!(t.lines, ["four", "five green"]);

        std::fs::write(&path, "again\n").unwrap();
        assert!(t.poll());
        assert_eq!(t.lines, ["five green", "again"]);
    }

    #[test]
    fn a_log_not_written_yet_is_followed_once_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.log");
        let mut t = Tail::open(path.clone(), 10);
        assert!(t.lines.is_empty());
        assert!(!t.poll());
        std::fs::write(&path, "listening on 8080\n").unwrap();
        assert!(t.poll());
        assert_eq!(t.lines, ["listening on 8080"]);
    }
}
