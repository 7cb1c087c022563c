//! The daemon: one per binky home, running the controllers and answering the control socket.
//!
//! `daemon::run` is a library function: `binky daemon run` calls it, and tests boot it
//! in-process in a temporary home.
//!
//! # Guarantees
//! - One daemon per home: an exclusive lock on `daemon.lock` (`flock` on Unix, `LockFileEx`
//!   on Windows: released by the system if the daemon dies, so a `kill -9` never leaves a
//!   stale lock).
//! - The control socket is mode 0600 inside a 0700 home (Unix); on Windows a named pipe no
//!   other machine and no second daemon can open as its server (`binky_platform::ipc`).
//! - Stopping the daemon (or killing it) leaves services running; the next daemon adopts
//!   them from the store.

pub mod clean;
pub mod client;
pub mod proxy_manager;
pub mod watch;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use binky_controllers::port::PortController;
use binky_controllers::process::{ProcessConfig, ProcessController};
use binky_controllers::runtime::{Runtime, RuntimeConfig, Trigger};
use binky_controllers::store::{Store, StoreError};
use binky_controllers::worktree::WorktreeController;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

use binky_controllers::adapter::SliceWork;
use binky_controllers::golden::GoldenController;
use binky_controllers::route::RouteController;
use binky_controllers::slice::SliceController;

use crate::adapters::Registry;
use crate::servers::{Kind, Servers};
use crate::slices::RealSlices;

use crate::git::GitCli;
use crate::paths::Home;
use crate::ports::BindProbe;
use crate::protocol::{Request, Response};
use crate::proxy::tls::{self, HostResolver, LocalCa};
use crate::proxy::{Proxy, Routes};
use crate::supervisor::RealSupervisor;
use proxy_manager::ProxyManager;

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The binky home it serves.
    pub home: Home,
    /// Runtime tuning.
    pub runtime: RuntimeConfig,
    /// Stop grace for services (unless their `stop_grace_period` says).
    pub stop_grace: Duration,
    /// How long a service without `health` may take to listen on its port when its world
    /// records no command's `--timeout` (a world's own is recorded by `up` and `reload`).
    pub port_wait: Duration,
    /// The `binky` binary whose `__scrub` scrubs services' output on its way to the logs;
    /// `None` writes it straight to the files.
    pub scrubber: Option<std::path::PathBuf>,
}

impl DaemonConfig {
    /// Defaults for `home`.
    pub fn new(home: Home) -> Self {
        DaemonConfig {
            home,
            runtime: RuntimeConfig::default(),
            stop_grace: Duration::from_secs(5),
            port_wait: binky_controllers::spec::DEFAULT_PORT_WAIT,
            // This binary, when it is binky (not a test binary booting the daemon).
            scrubber: std::env::current_exe().ok().filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("binky"))
            }),
        }
    }
}

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the lock.
    #[error("another binky daemon is already running for {home} (pid {pid})")]
    AlreadyRunning {
        /// The home.
        home: String,
        /// Its pid, if known.
        pid: String,
    },
    /// The home directory is unusable.
    #[error("cannot use {path}: {source}")]
    Home {
        /// Which path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn take_lock(home: &Home) -> Result<binky_platform::lock::Held, DaemonError> {
    let path = home.lock();
    let io = |source| DaemonError::Home {
        path: path.display().to_string(),
        source,
    };
    match binky_platform::lock::try_exclusive(&path).map_err(io)? {
        Some(mut held) => {
            // The system releases the lock when its file closes: on drop, or when the daemon
            // dies however it dies. The pid is read by `binky daemon stop` and by a command
            // whose own daemon lost the race to this one.
            held.set_text(&std::process::id().to_string()).map_err(io)?;
            Ok(held)
        }
        None => Err(DaemonError::AlreadyRunning {
            home: home.root().display().to_string(),
            pid: std::fs::read_to_string(&path)
                .unwrap_or_default()
                .trim()
                .to_owned(),
        }),
    }
}

/// Run the daemon until `shutdown` resolves or a client asks it to stop.
pub async fn run(
    config: DaemonConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), DaemonError> {
    let home = &config.home;
    home.ensure().map_err(|source| DaemonError::Home {
        path: home.root().display().to_string(),
        source,
    })?;
    let _lock = take_lock(home)?;
    let store = Store::open(&home.db())?;
    let socket = home.socket();
    let mut listener =
        binky_platform::ipc::Listener::bind(&socket).map_err(|source| DaemonError::Home {
            path: socket.display().to_string(),
            source,
        })?;

    let mut runtime = Runtime::new(store.clone(), config.runtime.clone());
    let trigger = runtime.trigger();
    let timings = runtime.timings();

    // The proxy: routes published by the route controller, HTTPS from the local CA.
    let routes = Routes::default();
    let dashboard = start_dashboard(home, &trigger);
    let site = dashboard
        .clone()
        .map(|d| d as Arc<dyn crate::proxy::OwnSite>);
    let proxy = Proxy::with_dashboard(routes.clone(), site);
    let tls = tls_acceptor(home, &routes);
    let ca_cert = tls.is_some().then(|| home.ca().join("ca.crt"));
    let manager = Arc::new(tokio::sync::Mutex::new(ProxyManager::new(
        store.clone(),
        proxy,
        tls,
    )));
    manager.lock().await.apply().await;
    let supervisor = supervisor(&config, &store, &trigger);
    let (processes, servers, slices) =
        add_controllers(&mut runtime, &config, &store, &supervisor, routes, ca_cert);

    let controllers = Task::spawn(|stop| runtime.run(async move { stop.notified().await }));
    let watchers = [
        Task::spawn(|stop| watch::run(store.clone(), trigger.clone(), stop)),
        Task::spawn(|stop| {
            crate::servers::watch::run(servers.clone(), store.clone(), trigger.clone(), stop)
        }),
        Task::spawn(|stop| crate::slices::named::run(slices, store.clone(), trigger.clone(), stop)),
        // What each service uses, read from its cgroup every few seconds.
        Task::spawn(|stop| processes.sample_until(binky_controllers::process::SAMPLE_EVERY, stop)),
    ];
    tracing::info!(pid = std::process::id(), home = %home.root().display(), version = env!("CARGO_PKG_VERSION"), "daemon started");

    let conn = Conn {
        trigger,
        timings,
        requested: Arc::new(Notify::new()),
        started: Instant::now(),
        home: home.clone(),
        proxy: manager.clone(),
        servers,
        dashboard: dashboard.clone(),
    };
    accept(&mut listener, shutdown, conn).await;

    tracing::info!("daemon stopping (services keep running)");
    for task in watchers {
        task.stop().await;
    }
    controllers.stop().await;
    manager.lock().await.stop().await;
    if let Some(d) = &dashboard {
        d.stop();
    }
    // Services keep running in their cgroups; what no service uses goes.
    supervisor.tidy();
    // The socket goes with its listener: a client finds no daemon rather than a dead one.
    drop(listener);
    Ok(())
}

/// The dashboard at binky.localhost: a page that cannot start leaves the proxy serving.
fn start_dashboard(home: &Home, trigger: &Trigger) -> Option<Arc<crate::dashboard::Dashboard>> {
    match crate::dashboard::Dashboard::start(home, trigger.clone()) {
        Ok(d) => Some(d),
        Err(err) => {
            tracing::error!(%err, "the dashboard is off");
            None
        }
    }
}

/// HTTPS from the home's local CA, for the dashboard and the routes that ask for it; none
/// (HTTPS off) when the CA cannot be had.
fn tls_acceptor(home: &Home, routes: &Routes) -> Option<tokio_rustls::TlsAcceptor> {
    let ca = match LocalCa::load_or_create(&home.ca()) {
        Ok(ca) => ca,
        Err(err) => {
            tracing::error!(%err, "HTTPS is off: no local CA");
            return None;
        }
    };
    let table = routes.clone();
    let allow = Arc::new(move |host: &str| {
        crate::dashboard::is_host(host) || table.load().lookup(host).is_some_and(|b| b.route.https)
    });
    match tls::server_config(Arc::new(HostResolver::new(Arc::new(ca), allow))) {
        Ok(cfg) => Some(tokio_rustls::TlsAcceptor::from(cfg)),
        Err(err) => {
            tracing::error!(%err, "HTTPS is off");
            None
        }
    }
}

/// The supervisor of the services' processes: secrets audited in the home, resources
/// detected, output scrubbed when there is a scrubber.
fn supervisor(config: &DaemonConfig, store: &Store, trigger: &Trigger) -> Arc<RealSupervisor> {
    let home = &config.home;
    let mut sup = RealSupervisor::new(home.tag(), trigger.clone())
        .with_secrets(crate::secrets::Secrets::new(
            store.clone(),
            home.root().join("secrets-audit.log"),
        ))
        .with_resources(crate::supervisor::resources::Resources::detect(&home.tag()));
    if let Some(binky) = &config.scrubber {
        sup = sup.with_scrubber(binky.clone());
    }
    Arc::new(sup)
}

/// Every controller, in the order the runtime runs them; the process controller (whose
/// sampler runs beside them) and the managed servers.
fn add_controllers(
    runtime: &mut Runtime,
    config: &DaemonConfig,
    store: &Store,
    supervisor: &Arc<RealSupervisor>,
    routes: Routes,
    ca_cert: Option<PathBuf>,
) -> (
    Arc<ProcessController<RealSupervisor>>,
    Arc<Servers>,
    RealSlices,
) {
    let home = &config.home;
    let trigger = runtime.trigger();
    let mut pconf = ProcessConfig::new(home.logs());
    pconf.stop_grace = config.stop_grace;
    pconf.port_wait = config.port_wait;
    pconf.ca_cert = ca_cert.clone();
    runtime.add(Arc::new(
        binky_controllers::gate::AdmissionController::new(
            store.clone(),
            crate::machine::RealMachine,
        )
        .with_trigger(trigger.clone()),
    ));
    // What a daemon killed while deleting removed worktrees left goes now.
    crate::trash::empty_trash(&home.trash());
    runtime.add(Arc::new(
        WorktreeController::new(store.clone(), GitCli::with_trash(home.trash()))
            .with_trigger(trigger.clone()),
    ));
    runtime.add(Arc::new(PortController::new(store.clone(), BindProbe)));
    let processes = Arc::new(
        ProcessController::new(store.clone(), supervisor.clone(), pconf)
            .with_trigger(trigger.clone()),
    );
    runtime.add(processes.clone());
    // Every routing table goes to the proxy, and to the hosts file a person asked binky to
    // keep (`binky hosts --write`).
    let sink = crate::hosts::KeptHosts::new(routes, store.clone());
    runtime.add(Arc::new(RouteController::new(store.clone(), sink)));
    let servers = Arc::new(Servers::new(home.clone(), store.clone()));
    // One daemon a home: no start of a server is under way but one a stopped daemon left.
    if let Err(err) = servers.fail_interrupted_starts() {
        tracing::warn!(%err, "cannot record the managed servers a stopped daemon was starting");
    }
    // One value does the slice work for both the slice and the golden controller; a clone
    // of its effects asks the servers binky.toml names whether they answer.
    let slices = RealSlices::new(Registry::default(), servers.clone());
    let slice_work = Arc::new(
        SliceWork::new(
            store.clone(),
            slices.clone(),
            supervisor.clone(),
            home.logs(),
        )
        .with_ca(ca_cert),
    );
    runtime.add(Arc::new(SliceController::new(
        store.clone(),
        slice_work.clone(),
    )));
    let builder = format!(
        "{}:{}",
        std::process::id(),
        binky_platform::proc::stat(std::process::id()).map_or(0, |s| s.start_time)
    );
    runtime.add(Arc::new(
        GoldenController::new(store.clone(), slice_work, builder)
            .with_machine(Arc::new(crate::machine::RealMachine)),
    ));
    (processes, servers, slices)
}

/// A task running beside the accept loop, and what tells it to end.
struct Task {
    stop: Arc<Notify>,
    handle: tokio::task::JoinHandle<()>,
}

impl Task {
    /// Spawn what `start` makes of its stop signal.
    fn spawn<F>(start: impl FnOnce(Arc<Notify>) -> F) -> Task
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = Arc::new(Notify::new());
        let handle = tokio::spawn(start(stop.clone()));
        Task { stop, handle }
    }

    /// Tell it to end, and wait until it has.
    async fn stop(self) {
        self.stop.notify_one();
        let _ = self.handle.await;
    }
}

/// Serve each connection of `listener` (with a copy of `conn`) until `shutdown` resolves or
/// a client asks the daemon to stop.
async fn accept(
    listener: &mut binky_platform::ipc::Listener,
    shutdown: impl Future<Output = ()>,
    conn: Conn,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = conn.requested.notified() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let ctx = conn.clone();
                    tokio::spawn(async move { ctx.serve(stream, peer).await });
                }
                Err(err) => tracing::warn!(%err, "accept failed"),
            },
        }
    }
}

/// What one connection to the control socket reaches.
#[derive(Clone)]
struct Conn {
    trigger: Trigger,
    timings: binky_controllers::runtime::Timings,
    requested: Arc<Notify>,
    started: Instant,
    home: Home,
    proxy: Arc<tokio::sync::Mutex<ProxyManager>>,
    servers: Arc<Servers>,
    dashboard: Option<Arc<crate::dashboard::Dashboard>>,
}

impl Conn {
    /// Answer the requests of one connection; `peer` is the pid of who asks, where the
    /// system tells it (a sign-in token is never handed to a process binky started).
    async fn serve(self, stream: binky_platform::ipc::Stream, peer: Option<u32>) {
        let (read, mut write) = tokio::io::split(stream);
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let (resp, stop) = match serde_json::from_str::<Request>(&line) {
                Ok(req) => self.handle(req, peer).await,
                Err(e) => (Response::error(format!("bad request: {e}")), false),
            };
            let mut text = serde_json::to_string(&resp).unwrap_or_else(|_| "{\"ok\":false}".into());
            text.push('\n');
            if write.write_all(text.as_bytes()).await.is_err() {
                break;
            }
            if stop {
                self.requested.notify_one();
                break;
            }
        }
    }

    async fn handle(&self, req: Request, peer: Option<u32>) -> (Response, bool) {
        // What is a person's (the CLI refuses it too) is refused to a caller binky started
        // that speaks the socket itself.
        if let Some((what, instead)) = req.persons() {
            if let Err(e) = crate::person::refusal(
                what,
                instead,
                peer.and_then(crate::person::pid_started_by_binky),
            ) {
                return (Response::error(e), false);
            }
        }
        match req {
            Request::Ping => (self.info(), false),
            Request::Nudge { world } => {
                match world {
                    Some(id) => self.trigger.world(id),
                    None => {
                        // A nudge of every world follows `binky settings`: the proxy's
                        // settings may have changed too.
                        self.proxy.lock().await.read_settings();
                        self.trigger.all();
                    }
                }
                (Response::ok(), false)
            }
            Request::Shutdown => (Response::ok(), true),
            Request::DashboardToken => match self.dashboard.as_ref().map(|d| {
                d.issue_token()
                    .map_err(|e| format!("cannot make a sign-in token: {e}"))
            }) {
                Some(Ok(token)) => {
                    let mut r = Response::ok();
                    r.token = Some(token);
                    (r, false)
                }
                Some(Err(e)) => (Response::error(e), false),
                None => (
                    Response::error("the dashboard is off (daemon.log says why)".to_owned()),
                    false,
                ),
            },
            Request::StopServers { kind } => match self
                .servers
                .stop(kind.as_deref().and_then(Kind::parse))
                .await
            {
                Ok(stopped) => {
                    let mut r = Response::ok();
                    r.stopped = Some(stopped);
                    (r, false)
                }
                Err(e) => (Response::error(e.to_string()), false),
            },
            Request::Reconfigure => {
                self.proxy.lock().await.apply().await;
                // URLs carry the proxy's ports: every world looks again.
                self.trigger.all();
                (Response::ok(), false)
            }
        }
    }

    fn info(&self) -> Response {
        let mut r = Response::ok();
        r.pid = Some(std::process::id());
        r.version = Some(env!("CARGO_PKG_VERSION").to_owned());
        r.uptime_secs = Some(self.started.elapsed().as_secs());
        r.rss_bytes = binky_platform::proc::rss_bytes(std::process::id());
        r.home = Some(self.home.root().display().to_string());
        r.controllers = Some(self.timings.snapshot());
        r
    }
}
