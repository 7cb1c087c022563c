//! Who may use the dashboard: one-time sign-in tokens, and the sessions they open.
//!
//! `binky dashboard` asks the daemon for a token over its control socket (mode 0600: only the
//! home's user can ask) and prints it in a link; opening the link signs the browser in: the
//! token is spent and a new session is made, whose id the browser keeps as an `HttpOnly`,
//! `SameSite=Strict` cookie.
//!
//! # Guarantees
//! - A token works once, for [`TOKEN_TTL`].
//! - A session id is 32 random bytes from the kernel (`getrandom`), made anew at every
//!   sign-in (a browser never keeps an id it came with). The daemon keeps only its SHA-256,
//!   in memory: no file holds it, so no other process of the user (a world's service
//!   included) can read it, and a daemon that restarts has signed everyone out.
//! - A session ends [`IDLE`] after its last request (a page that follows a stream is in use
//!   while it does), [`MAX_AGE`] after its sign-in whatever happens, when the browser signs
//!   out, and when the same browser signs in again (its old id goes: rotation). A stream a
//!   session opened (the worlds, a log) ends with it.
//! - At most [`MAX_SESSIONS`] sessions live at once; a new sign-in ends the least recently
//!   used beyond that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use binky_controllers::random::{self, RandomError};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// How long a sign-in link works.
pub const TOKEN_TTL: Duration = Duration::from_secs(600);

/// A session ends this long after its last request.
pub const IDLE: Duration = Duration::from_secs(12 * 3600);

/// A session ends this long after its sign-in, used or not.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// Most sessions alive at once.
pub const MAX_SESSIONS: usize = 64;

/// The SHA-256 of a token or a session id: what is kept and looked up (a lookup's timing
/// says nothing about an id whose hash nobody can choose).
type Digest32 = [u8; 32];

fn digest(s: &str) -> Digest32 {
    Sha256::digest(s.as_bytes()).into()
}

struct Session {
    signed_in: Instant,
    used: Instant,
    /// Dropped when the session ends: every stream holding a receiver ends then.
    alive: watch::Sender<()>,
}

impl Session {
    fn live(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.signed_in) < MAX_AGE
            && (now.saturating_duration_since(self.used) < IDLE || self.alive.receiver_count() > 0)
    }
}

#[derive(Default)]
struct Inner {
    tokens: HashMap<Digest32, Instant>,
    sessions: HashMap<Digest32, Session>,
}

impl Inner {
    fn prune(&mut self, now: Instant) {
        self.tokens
            .retain(|_, made| now.saturating_duration_since(*made) < TOKEN_TTL);
        self.sessions.retain(|_, s| s.live(now));
    }
}

/// The tokens and sessions of one daemon.
#[derive(Default)]
pub struct Sessions(Mutex<Inner>);

/// What a stream of a session holds: it ends when the session does.
pub struct Lease {
    alive: watch::Receiver<()>,
    until: Instant,
}

impl Lease {
    /// Resolves when the session has ended (signed out, replaced, expired).
    pub async fn ended(&mut self) {
        tokio::select! {
            // Nothing is ever sent: this returns when the session's sender is dropped.
            _ = self.alive.changed() => {}
            () = tokio::time::sleep_until(self.until.into()) => {}
        }
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new one-time sign-in token.
    pub fn issue_token(&self, now: Instant) -> Result<String, RandomError> {
        let token = random::hex(24)?;
        let mut inner = self.lock();
        inner.prune(now);
        inner.tokens.insert(digest(&token), now);
        Ok(token)
    }

    /// Spend `token` and open a session: its id, or `None` for a token that is not (or no
    /// longer) valid. The sessions of `previous` (the ids the browser came with) end.
    pub fn sign_in(
        &self,
        token: &str,
        previous: &[&str],
        now: Instant,
    ) -> Result<Option<String>, RandomError> {
        let id = random::hex(32)?;
        let mut inner = self.lock();
        inner.prune(now);
        if token.is_empty() || inner.tokens.remove(&digest(token)).is_none() {
            return Ok(None);
        }
        for old in previous {
            inner.sessions.remove(&digest(old));
        }
        while inner.sessions.len() >= MAX_SESSIONS {
            let Some(oldest) = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            inner.sessions.remove(&oldest);
        }
        let (alive, _) = watch::channel(());
        inner.sessions.insert(
            digest(&id),
            Session {
                signed_in: now,
                used: now,
                alive,
            },
        );
        Ok(Some(id))
    }

    /// The live session among `ids` (a browser may send more than one cookie of the name),
    /// marked used now; `None` when there is none.
    pub fn check(&self, ids: &[&str], now: Instant) -> Option<Lease> {
        let mut inner = self.lock();
        inner.prune(now);
        ids.iter().find_map(|id| {
            let s = inner.sessions.get_mut(&digest(id))?;
            s.used = now;
            Some(Lease {
                alive: s.alive.subscribe(),
                until: s.signed_in + MAX_AGE,
            })
        })
    }

    /// End the sessions of `ids`; whether one was live.
    pub fn sign_out(&self, ids: &[&str], now: Instant) -> bool {
        let mut inner = self.lock();
        inner.prune(now);
        let mut ended = false;
        for id in ids {
            ended |= inner.sessions.remove(&digest(id)).is_some();
        }
        ended
    }

    /// Sessions alive now.
    #[cfg(test)]
    fn count(&self, now: Instant) -> usize {
        let mut inner = self.lock();
        inner.prune(now);
        inner.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_in(s: &Sessions, now: Instant) -> String {
        let token = s.issue_token(now).unwrap();
        s.sign_in(&token, &[], now).unwrap().expect("a session")
    }

    #[test]
    fn a_token_works_once_and_for_ten_minutes() {
        let s = Sessions::default();
        let now = Instant::now();
        let token = s.issue_token(now).unwrap();
        assert_eq!(token.len(), 48);
        let id = s.sign_in(&token, &[], now).unwrap().unwrap();
        assert_eq!(id.len(), 64);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(s.sign_in(&token, &[], now).unwrap(), None, "replayed");
        let late = s.issue_token(now).unwrap();
        assert_eq!(s.sign_in(&late, &[], now + TOKEN_TTL).unwrap(), None);
        assert_eq!(s.sign_in("", &[], now).unwrap(), None);
        assert_eq!(s.sign_in(&id, &[], now).unwrap(), None, "an id is no token");
    }

    #[test]
    fn a_session_ends_when_idle_at_its_age_at_sign_out_and_when_replaced() {
        let s = Sessions::default();
        let t0 = Instant::now();
        // Idle: used within IDLE it lives on, up to MAX_AGE.
        let id = signed_in(&s, t0);
        let almost = IDLE - Duration::from_secs(1);
        assert!(s.check(&[&id], t0 + almost).is_some());
        assert!(s.check(&[&id], t0 + almost * 2).is_some());
        assert!(s.check(&[&id], t0 + almost * 2 + IDLE).is_none(), "idle");
        assert!(
            s.check(&[&id], t0).is_none(),
            "an ended session stays ended"
        );
        // Age: in use all the time, it still ends MAX_AGE after its sign-in.
        let id = signed_in(&s, t0);
        let mut at = t0;
        while at < t0 + MAX_AGE - Duration::from_secs(3600) {
            at += Duration::from_secs(3600);
            assert!(s.check(&[&id], at).is_some(), "{:?}", at - t0);
        }
        assert!(s.check(&[&id], t0 + MAX_AGE).is_none(), "too old");
        // Sign-out.
        let id = signed_in(&s, t0);
        assert!(s.sign_out(&[&id], t0));
        assert!(s.check(&[&id], t0).is_none());
        assert!(!s.sign_out(&[&id], t0));
        // Signing in again from the browser that holds `id` ends `id`.
        let id = signed_in(&s, t0);
        let token = s.issue_token(t0).unwrap();
        let new = s.sign_in(&token, &[&id], t0).unwrap().unwrap();
        assert_ne!(new, id);
        assert!(s.check(&[&id], t0).is_none(), "the old id was rotated out");
        assert!(s.check(&["nope", &new], t0).is_some());
    }

    #[tokio::test]
    async fn a_stream_ends_with_its_session_and_keeps_it_in_use_while_it_lasts() {
        let s = Sessions::default();
        let t0 = Instant::now();
        let id = signed_in(&s, t0);
        let mut lease = s.check(&[&id], t0).unwrap();
        // Followed by a page, the session is in use past IDLE (never past MAX_AGE).
        assert!(s.check(&[&id], t0 + IDLE * 3 / 2).is_some());
        let ended = tokio::time::timeout(Duration::from_millis(50), lease.ended()).await;
        assert!(ended.is_err(), "the stream goes on while the session lives");
        assert!(s.sign_out(&[&id], t0));
        tokio::time::timeout(Duration::from_secs(10), lease.ended())
            .await
            .expect("the stream ends at sign-out");
        // And at the session's age (its timer is set for then).
        let id = signed_in(&s, t0);
        let lease = s.check(&[&id], t0 + IDLE / 2).unwrap();
        assert_eq!(lease.until, t0 + MAX_AGE);
    }

    #[test]
    fn sessions_are_bounded_and_the_least_recently_used_goes_first() {
        let s = Sessions::default();
        let t0 = Instant::now();
        let ids: Vec<String> = (0..MAX_SESSIONS)
            .map(|i| signed_in(&s, t0 + Duration::from_secs(i as u64)))
            .collect();
        let late = t0 + Duration::from_secs(MAX_SESSIONS as u64);
        assert!(s.check(&[&ids[0]], late).is_some());
        let extra = signed_in(&s, late);
        assert_eq!(s.count(late), MAX_SESSIONS);
        assert!(s.check(&[&extra], late).is_some());
        assert!(s.check(&[&ids[0]], late).is_some(), "used lately: kept");
        assert!(
            s.check(&[&ids[1]], late).is_none(),
            "least recently used: gone"
        );
    }
}
