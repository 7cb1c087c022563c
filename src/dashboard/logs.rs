//! A live log view: the last lines of a world's (or one service's) log files, then each new
//! line as it is written, as server-sent events. Lines are scrubbed again on their way out.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;

use crate::proxy::body::Body;
use crate::scrub::Scrubber;

/// How often the files are looked at for new output.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Most lines in one event (a service printing fast is sent in several).
const BATCH: usize = 500;

#[derive(Serialize)]
struct Line<'a> {
    /// Its service (or replica, or `hooks`).
    s: &'a str,
    /// The line.
    l: String,
}

struct Followed {
    name: String,
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Followed {
    /// The lines written since the last look.
    fn new_lines(&mut self, scrubber: &Scrubber, out: &mut Vec<(usize, String)>, me: usize) {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Truncated or replaced: from its start.
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        let _ = (&mut f).take(len - self.offset).read_to_end(&mut buf);
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut start = 0;
        while let Some(nl) = memchr::memchr(b'\n', &self.partial[start..]) {
            let line = &self.partial[start..start + nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            out.push((
                me,
                String::from_utf8_lossy(&scrubber.line(line)).into_owned(),
            ));
            start += nl + 1;
        }
        self.partial.drain(..start);
    }
}

fn event(kind: &str, files: &[Followed], lines: &[(usize, String)]) -> Bytes {
    let items: Vec<Line> = lines
        .iter()
        .map(|(i, l)| Line {
            s: &files[*i].name,
            l: l.clone(),
        })
        .collect();
    Bytes::from(format!(
        "event: {kind}\ndata: {}\n\n",
        serde_json::to_string(&items).unwrap_or_else(|_| "[]".into())
    ))
}

/// Stream `sources` (name, file): the last `n` lines of each, then what is written, for as
/// long as the session of `lease` lives.
pub fn stream(
    sources: Vec<(String, PathBuf)>,
    n: usize,
    scrubber: Scrubber,
    mut lease: super::session::Lease,
) -> hyper::Response<Body> {
    let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(16);
    tokio::spawn(async move {
        let mut files: Vec<Followed> = Vec::new();
        let mut history: Vec<(usize, String)> = Vec::new();
        for (i, (name, path)) in sources.into_iter().enumerate() {
            let (lines, len) = crate::view::log_tail_to_follow(&path, n);
            history.extend(lines.into_iter().map(|l| {
                (
                    i,
                    String::from_utf8_lossy(&scrubber.line(l.as_bytes())).into_owned(),
                )
            }));
            files.push(Followed {
                name,
                path,
                offset: len,
                partial: Vec::new(),
            });
        }
        for chunk in history.chunks(BATCH) {
            if tx.send_data(event("history", &files, chunk)).await.is_err() {
                return;
            }
        }
        if tx
            .send_data(Bytes::from_static(b"event: live\ndata: {}\n\n"))
            .await
            .is_err()
        {
            return;
        }
        let mut quiet_since = Instant::now();
        loop {
            tokio::select! {
                () = lease.ended() => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            let mut new = Vec::new();
            for (i, f) in files.iter_mut().enumerate() {
                f.new_lines(&scrubber, &mut new, i);
            }
            for chunk in new.chunks(BATCH) {
                if tx.send_data(event("lines", &files, chunk)).await.is_err() {
                    return;
                }
                quiet_since = Instant::now();
            }
            if quiet_since.elapsed() >= super::snapshot::HEARTBEAT {
                if tx
                    .send_data(Bytes::from_static(b": still here\n\n"))
                    .await
                    .is_err()
                {
                    return;
                }
                quiet_since = Instant::now();
            }
        }
    });
    super::sse(body)
}
