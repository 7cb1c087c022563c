//! The daemon's local socket: where the CLI's requests reach the daemon of one binky home,
//! and who sent them (the peer's pid, for the guard of what only a person may do).
//!
//! Unix: a Unix socket at the home's socket path, mode 0600 in a 0700 folder; the peer's pid
//! from the socket's credentials (`SO_PEERCRED` on Linux, `LOCAL_PEERPID` on macOS; `None`
//! where the system keeps it: FreeBSD, NetBSD). Windows: a named pipe whose name is made
//! from that same path (`\\.\pipe\binky-<hash>`), refusing clients from other machines and
//! a second server of the same name (a second daemon cannot take it over: the first
//! instance flag, and a look for a server before it); the peer's pid from
//! `GetNamedPipeClientProcessId`. The pipe's access list has one entry, the current user
//! (Windows' default list would also let every other user open it to read).

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Where the daemon of one home listens.
pub struct Listener {
    #[cfg(unix)]
    inner: tokio::net::UnixListener,
    /// The socket's file, removed when the listener goes.
    #[cfg(unix)]
    path: std::path::PathBuf,
    #[cfg(windows)]
    name: String,
    /// Who may open the pipe: the current user alone.
    #[cfg(windows)]
    own: own::UsersOwn,
    /// The pipe instance the next client connects to.
    #[cfg(windows)]
    next: tokio::net::windows::named_pipe::NamedPipeServer,
}

/// One connection, either side: bytes in both directions.
pub struct Stream(Inner);

enum Inner {
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
    #[cfg(windows)]
    Server(tokio::net::windows::named_pipe::NamedPipeServer),
    #[cfg(windows)]
    Client(tokio::net::windows::named_pipe::NamedPipeClient),
}

impl Listener {
    /// Listens at `path` (the home's socket path). Unix: its folder is made (mode 0700), a
    /// socket an earlier daemon left is replaced, and the new one is mode 0600. Windows: the
    /// pipe named after `path`; an error if another process already serves that name. Call
    /// within a tokio runtime, and only holding the home's lock (one daemon a home).
    pub fn bind(path: &Path) -> io::Result<Listener> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
                // Best effort: a folder binky does not own (a shared runtime dir) keeps its mode.
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            }
            let _ = std::fs::remove_file(path);
            let inner = tokio::net::UnixListener::bind(path)?;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            Ok(Listener {
                inner,
                path: path.to_owned(),
            })
        }
        #[cfg(windows)]
        {
            use windows_sys::Win32::Foundation::ERROR_PIPE_BUSY;
            let name = pipe_name(path);
            // Someone answering the name already: refused here too, not only by the first
            // instance flag below (which Wine does not enforce).
            let served = match tokio::net::windows::named_pipe::ClientOptions::new().open(&name) {
                Ok(_) => true,
                Err(e) => e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32),
            };
            if served {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "another process already serves the pipe {name} of {}: a daemon of this home runs, or a program took its name; stop it, or use another BINKY_HOME",
                        path.display()
                    ),
                ));
            }
            let own = own::UsersOwn::new()?;
            let next = own.create(&name, true)?;
            Ok(Listener { name, own, next })
        }
    }

    /// The next client's connection and its pid, where the system tells it. Cancel safe: a
    /// client not yet taken waits for the next call.
    pub async fn accept(&mut self) -> io::Result<(Stream, Option<u32>)> {
        #[cfg(unix)]
        {
            let (stream, _) = self.inner.accept().await?;
            let pid = peer_pid(&stream);
            Ok((Stream(Inner::Unix(stream)), pid))
        }
        #[cfg(windows)]
        {
            use std::os::windows::io::AsRawHandle;
            self.next.connect().await?;
            // A new instance for the next client before this one is handed over: a client
            // finds the name served at every moment.
            let fresh = self.own.create(&self.name, false)?;
            let connected = std::mem::replace(&mut self.next, fresh);
            let mut pid = 0u32;
            // SAFETY: the handle is the connected pipe's, alive for this call; `pid` is ours.
            let ok = unsafe {
                windows_sys::Win32::System::Pipes::GetNamedPipeClientProcessId(
                    connected.as_raw_handle(),
                    &mut pid,
                )
            };
            let pid = (ok != 0 && pid != 0).then_some(pid);
            Ok((Stream(Inner::Server(connected)), pid))
        }
    }
}

/// The pid of the process at the other end of `stream`, from the socket's credentials taken
/// when it connected: `SO_PEERCRED` on Linux (and OpenBSD), through tokio; `None` where the
/// system keeps it (FreeBSD, NetBSD: only the user, through `getpeereid`).
#[cfg(all(unix, not(target_os = "macos")))]
fn peer_pid(stream: &tokio::net::UnixStream) -> Option<u32> {
    stream
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok())
}

/// macOS: `getsockopt(SOL_LOCAL, LOCAL_PEERPID)`, the pid of the process that connected.
/// Not tokio's `peer_cred`: it asks `LOCAL_PEEREPID`, the pid a process connects *on behalf
/// of* (a delegating system service names another), while the guard of what only a person
/// may do wants the process that is really there.
#[cfg(target_os = "macos")]
fn peer_pid(stream: &tokio::net::UnixStream) -> Option<u32> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let mut pid: libc::pid_t = 0;
    let mut len = size_of::<libc::pid_t>() as libc::socklen_t;
    // SAFETY: the descriptor is the connected socket's, open for the call; `pid` and `len`
    // are ours, `len` the size of `pid`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_LOCAL,
            libc::LOCAL_PEERPID,
            (&mut pid as *mut libc::pid_t).cast(),
            &mut len,
        )
    };
    darwin::peer_pid(rc, len as usize, pid)
}

/// macOS' answer about a socket's peer, read as plain numbers: compiled and tested on every
/// system, used on macOS.
pub mod darwin {
    /// `getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &pid, &len)` from `<sys/un.h>`: its
    /// return `rc`, the `len` it set, the `pid` it wrote. A pid only when the call
    /// succeeded, wrote a whole `pid_t` (4 bytes) and names a process (above 0: the kernel
    /// writes 0 for a peer it no longer knows, e.g. one that has exited).
    pub fn peer_pid(rc: i32, len: usize, pid: i32) -> Option<u32> {
        if rc != 0 || len != size_of::<i32>() {
            return None;
        }
        u32::try_from(pid).ok().filter(|p| *p > 0)
    }
}

#[cfg(unix)]
impl Drop for Listener {
    fn drop(&mut self) {
        // No daemon listens any more: a client finds no socket rather than a dead one.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Connects to the daemon listening at `path` (the home's socket path). An error when none
/// listens.
pub async fn connect(path: &Path) -> io::Result<Stream> {
    #[cfg(unix)]
    {
        let stream = tokio::net::UnixStream::connect(path).await?;
        Ok(Stream(Inner::Unix(stream)))
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::ERROR_PIPE_BUSY;
        let name = pipe_name(path);
        // Every instance busy is a moment between a client taken and the next instance made
        // (or many clients at once): try again, for at most about two seconds.
        let mut tries = 0;
        loop {
            match tokio::net::windows::named_pipe::ClientOptions::new().open(&name) {
                Ok(client) => return Ok(Stream(Inner::Client(client))),
                Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) && tries < 200 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The pipe's name for a home's socket path: `\\.\pipe\binky-` and a hash of the path, so
/// each home has its own and the same home always the same (64-bit FNV-1a: stable across
/// builds and versions, unlike std's hasher).
#[cfg(any(windows, test))]
fn pipe_name(path: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!(r"\\.\pipe\binky-{hash:016x}")
}

/// The pipe's access list: the current user's alone.
#[cfg(windows)]
mod own {
    use std::io;
    use std::ptr::null_mut;

    use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
    use windows_sys::Win32::Foundation::{CloseHandle, LocalFree, HANDLE};
    use windows_sys::Win32::Security::Authorization::{
        ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW,
        SDDL_REVISION_1,
    };
    use windows_sys::Win32::Security::{
        GetTokenInformation, TokenUser, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES, TOKEN_QUERY,
        TOKEN_USER,
    };
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

    /// A security descriptor whose one entry gives the current user every right.
    pub struct UsersOwn(PSECURITY_DESCRIPTOR);

    // SAFETY: the descriptor is memory this value alone owns, never written after it is made.
    unsafe impl Send for UsersOwn {}
    // SAFETY: as above: shared, it is only read.
    unsafe impl Sync for UsersOwn {}

    impl Drop for UsersOwn {
        fn drop(&mut self) {
            // SAFETY: allocated by ConvertStringSecurityDescriptorToSecurityDescriptorW.
            unsafe { LocalFree(self.0) };
        }
    }

    impl UsersOwn {
        /// `D:P(A;;GA;;;<the current user's SID>)`: nobody else, not even by inheritance.
        pub fn new() -> io::Result<UsersOwn> {
            let sddl = format!("D:P(A;;GA;;;{})", current_user_sid()?);
            let wide: Vec<u16> = sddl.encode_utf16().chain(Some(0)).collect();
            let mut sd: PSECURITY_DESCRIPTOR = null_mut();
            // SAFETY: `wide` ends with a NUL; `sd` receives memory freed on drop.
            let ok = unsafe {
                ConvertStringSecurityDescriptorToSecurityDescriptorW(
                    wide.as_ptr(),
                    SDDL_REVISION_1,
                    &mut sd,
                    null_mut(),
                )
            };
            if ok == 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(UsersOwn(sd))
        }

        /// A pipe instance of `name` only the current user opens; `first`: an error if the
        /// name is served already.
        pub fn create(&self, name: &str, first: bool) -> io::Result<NamedPipeServer> {
            let mut attributes = SECURITY_ATTRIBUTES {
                nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
                lpSecurityDescriptor: self.0,
                bInheritHandle: 0,
            };
            // SAFETY: the attributes and the descriptor they point at outlive the call.
            unsafe {
                ServerOptions::new()
                    .first_pipe_instance(first)
                    .reject_remote_clients(true)
                    .create_with_security_attributes_raw(
                        name,
                        (&mut attributes as *mut SECURITY_ATTRIBUTES).cast(),
                    )
            }
        }
    }

    /// The current user's SID as text (`S-1-5-21-…`).
    pub fn current_user_sid() -> io::Result<String> {
        // SAFETY: the token is opened and closed here; the buffer is sized by the first call
        // and 8-byte aligned for TOKEN_USER; the SID's text is freed once copied.
        unsafe {
            let mut token: HANDLE = null_mut();
            if OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) == 0 {
                return Err(io::Error::last_os_error());
            }
            let mut len = 0u32;
            GetTokenInformation(token, TokenUser, null_mut(), 0, &mut len);
            let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
            let ok = GetTokenInformation(token, TokenUser, buf.as_mut_ptr().cast(), len, &mut len);
            let err = io::Error::last_os_error();
            CloseHandle(token);
            if ok == 0 {
                return Err(err);
            }
            let user = &*(buf.as_ptr() as *const TOKEN_USER);
            let mut text = null_mut();
            if ConvertSidToStringSidW(user.User.Sid, &mut text) == 0 {
                return Err(io::Error::last_os_error());
            }
            let mut n = 0;
            while *text.add(n) != 0 {
                n += 1;
            }
            let sid = String::from_utf16_lossy(std::slice::from_raw_parts(text, n));
            LocalFree(text.cast());
            Ok(sid)
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            #[cfg(unix)]
            Inner::Unix(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(windows)]
            Inner::Server(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(windows)]
            Inner::Client(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            #[cfg(unix)]
            Inner::Unix(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(windows)]
            Inner::Server(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(windows)]
            Inner::Client(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            #[cfg(unix)]
            Inner::Unix(s) => Pin::new(s).poll_flush(cx),
            #[cfg(windows)]
            Inner::Server(s) => Pin::new(s).poll_flush(cx),
            #[cfg(windows)]
            Inner::Client(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            #[cfg(unix)]
            Inner::Unix(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(windows)]
            Inner::Server(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(windows)]
            Inner::Client(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn a_client_is_answered_and_its_pid_is_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("daemon.sock");
        let mut listener = Listener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (stream, pid) = listener.accept().await.unwrap();
            let (read, mut write) = tokio::io::split(stream);
            let mut line = String::new();
            BufReader::new(read).read_line(&mut line).await.unwrap();
            write
                .write_all(format!("got {line}").as_bytes())
                .await
                .unwrap();
            pid
        });
        let stream = connect(&path).await.unwrap();
        let (read, mut write) = tokio::io::split(stream);
        write.write_all(b"ping\n").await.unwrap();
        let mut answer = String::new();
        BufReader::new(read).read_line(&mut answer).await.unwrap();
        assert_eq!(answer, "got ping\n");
        assert_eq!(server.await.unwrap(), Some(std::process::id()));
    }

    #[tokio::test]
    async fn clients_one_after_another_and_at_once_are_each_answered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let mut listener = Listener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            for _ in 0..6 {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let (read, mut write) = tokio::io::split(stream);
                    let mut line = String::new();
                    BufReader::new(read).read_line(&mut line).await.unwrap();
                    write.write_all(line.as_bytes()).await.unwrap();
                });
            }
        });
        let ask = |n: usize| {
            let path = path.clone();
            async move {
                let (read, mut write) = tokio::io::split(connect(&path).await.unwrap());
                write.write_all(format!("{n}\n").as_bytes()).await.unwrap();
                let mut answer = String::new();
                BufReader::new(read).read_line(&mut answer).await.unwrap();
                answer
            }
        };
        for n in 0..3 {
            assert_eq!(ask(n).await, format!("{n}\n"));
        }
        let at_once = [ask(3), ask(4), ask(5)];
        let mut answers = Vec::new();
        for a in at_once.map(tokio::spawn) {
            answers.push(a.await.unwrap());
        }
        assert_eq!(answers, ["3\n", "4\n", "5\n"]);
        server.await.unwrap();
    }

    #[tokio::test]
    async fn nobody_listening_is_an_error_and_a_gone_listener_leaves_nothing_to_reach() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        assert!(connect(&path).await.is_err());
        drop(Listener::bind(&path).unwrap());
        assert!(connect(&path).await.is_err());
        #[cfg(unix)]
        assert!(!path.exists(), "the socket file went with its listener");
    }

    #[test]
    fn macos_peer_pid_is_taken_only_from_a_whole_successful_answer() {
        assert_eq!(darwin::peer_pid(0, 4, 4242), Some(4242));
        // The call failed (EINVAL on a socket that is not connected, ENOTCONN).
        assert_eq!(darwin::peer_pid(-1, 4, 4242), None);
        // A short answer is not a pid.
        assert_eq!(darwin::peer_pid(0, 2, 4242), None);
        // No process: the kernel's 0, or garbage below it.
        assert_eq!(darwin::peer_pid(0, 4, 0), None);
        assert_eq!(darwin::peer_pid(0, 4, -1), None);
    }

    #[test]
    fn each_home_has_its_own_pipe_name_and_keeps_it() {
        let a = pipe_name(Path::new("/home/a/.binky/daemon.sock"));
        assert_eq!(a, pipe_name(Path::new("/home/a/.binky/daemon.sock")));
        assert_ne!(a, pipe_name(Path::new("/home/b/.binky/daemon.sock")));
        assert!(a.starts_with(r"\\.\pipe\binky-"), "{a}");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_socket_is_its_owners_alone_and_an_old_one_is_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("daemon.sock");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "left by a daemon that died").unwrap();
        let _listener = Listener::bind(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert!(connect(&path).await.is_ok());
    }

    #[cfg(windows)]
    #[tokio::test]
    async fn the_pipe_is_the_current_users_alone() {
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Foundation::LocalFree;
        use windows_sys::Win32::Security::Authorization::{
            ConvertSecurityDescriptorToStringSecurityDescriptorW, GetSecurityInfo, SDDL_REVISION_1,
            SE_KERNEL_OBJECT,
        };
        use windows_sys::Win32::Security::DACL_SECURITY_INFORMATION;
        let dir = tempfile::tempdir().unwrap();
        let listener = Listener::bind(&dir.path().join("daemon.sock")).unwrap();
        let mut sd = std::ptr::null_mut();
        let mut text = std::ptr::null_mut();
        let mut len = 0u32;
        // SAFETY: the pipe's handle lives through the calls; what they allocate is freed.
        let dacl = unsafe {
            let rc = GetSecurityInfo(
                listener.next.as_raw_handle(),
                SE_KERNEL_OBJECT,
                DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut sd,
            );
            assert_eq!(rc, 0, "GetSecurityInfo");
            let ok = ConvertSecurityDescriptorToStringSecurityDescriptorW(
                sd,
                SDDL_REVISION_1,
                DACL_SECURITY_INFORMATION,
                &mut text,
                &mut len,
            );
            assert_ne!(
                ok, 0,
                "ConvertSecurityDescriptorToStringSecurityDescriptorW"
            );
            let n = (0..).take_while(|i| *text.add(*i) != 0).count();
            let dacl = String::from_utf16_lossy(std::slice::from_raw_parts(text, n));
            LocalFree(text.cast());
            LocalFree(sd);
            dacl
        };
        let sid = own::current_user_sid().unwrap();
        // One entry, the user's: `D:P(A;;FA;;;S-1-5-21-…)` (its rights as Windows words them).
        assert_eq!(dacl.matches("(A;").count(), 1, "{dacl}");
        assert!(
            dacl.contains(&format!(";;;{sid})")),
            "{dacl} is not {sid}'s alone"
        );
    }

    #[cfg(windows)]
    #[tokio::test]
    async fn a_second_server_cannot_take_a_served_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let _first = Listener::bind(&path).unwrap();
        assert!(Listener::bind(&path).is_err());
    }
}
