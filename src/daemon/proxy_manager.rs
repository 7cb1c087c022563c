//! The daemon's side of the proxy: which ports it serves on, rebinding when `binky port`
//! changes them, and the observed `proxy_status` row that status and URLs read.

use std::sync::Arc;

use binky_controllers::store::{self, owner, write, Store, DEFAULT_HTTPS_PORT, DEFAULT_PROXY_PORT};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::proxy::{self, listen, Proxy};

/// Fallbacks when the default ports (80, 443) cannot be had.
const HTTP_FALLBACKS: &[u16] = &[8080, 8081, 8082, 18080, 18081, 18082];
const HTTPS_FALLBACKS: &[u16] = &[8443, 8444, 8445, 18443, 18444, 18445];

/// The listeners currently served.
pub struct ProxyManager {
    store: Store,
    proxy: Arc<Proxy>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: Option<watch::Sender<bool>>,
    tasks: Vec<JoinHandle<()>>,
    serving: (Option<u16>, Option<u16>),
    wanted: (Option<u16>, Option<u16>),
}

fn wanted_port(store: &Store, key: &str, default: u16) -> Option<u16> {
    let v = store.read(|c| store::setting(c, key)).ok().flatten();
    match v.as_deref().map(str::parse::<u16>) {
        Some(Ok(0)) => None,
        Some(Ok(p)) => Some(p),
        _ => Some(default),
    }
}

/// How many worker threads serve the proxy: one per core, at most four.
fn worker_count() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4)
}

/// Bind `wanted` (or a fallback) with sockets for `workers` workers; a note when it is not
/// the asked-for port or none could be had.
fn bind_port(
    wanted: Option<u16>,
    defaults: &[u16],
    workers: usize,
) -> (Option<listen::Bound>, String) {
    let Some(wanted) = wanted else {
        return (None, String::new());
    };
    let fallbacks = if wanted == DEFAULT_PROXY_PORT || wanted == DEFAULT_HTTPS_PORT {
        defaults.to_vec()
    } else {
        listen::fallbacks(wanted, defaults)
    };
    match listen::bind(
        wanted,
        &fallbacks,
        workers,
        binky_platform::proc::listener_of,
    ) {
        Ok(bound) => {
            let note = bound.note.clone();
            (Some(bound), note)
        }
        Err(why) => (None, why),
    }
}

/// One worker's sockets, each with its TLS acceptor for the HTTPS port.
type Sockets = Vec<(std::net::TcpListener, Option<tokio_rustls::TlsAcceptor>)>;

/// Start a worker thread: a single-threaded runtime of its own serving `sockets` (its own
/// sockets on every port) with its own connections to backends, so a request never hops
/// between threads (like nginx's workers). The task pushed to `tasks` ends with the thread.
fn spawn_worker(
    sockets: Sockets,
    proxy: Arc<Proxy>,
    stop: watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) {
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("binky-proxy".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(err) => {
                    tracing::error!(%err, "cannot start a proxy worker");
                    return;
                }
            };
            rt.block_on(async move {
                let mut serving = tokio::task::JoinSet::new();
                for (l, tls) in sockets {
                    match TcpListener::from_std(l) {
                        Ok(l) => {
                            serving.spawn(proxy::serve(l, proxy.clone(), tls, stop.clone()));
                        }
                        Err(err) => tracing::warn!(%err, "cannot use a proxy socket"),
                    }
                }
                while serving.join_next().await.is_some() {}
            });
            let _ = done_tx.send(());
        });
    if spawned.is_ok() {
        tasks.push(tokio::spawn(async move {
            let _ = done_rx.await;
        }));
    }
}

impl ProxyManager {
    /// A manager serving `proxy`, with HTTPS when `tls` is given.
    pub fn new(store: Store, proxy: Arc<Proxy>, tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        ProxyManager {
            store,
            proxy,
            tls,
            stop: None,
            tasks: Vec::new(),
            serving: (None, None),
            wanted: (None, None),
        }
    }

    /// Take the proxy's machine settings that need no rebinding (`proxy_answer_timeout`)
    /// as they are in the store now.
    pub fn read_settings(&self) {
        let limit = match binky_controllers::settings::Settings::read(&self.store) {
            Ok(s) => s.duration("proxy_answer_timeout"),
            Err(err) => {
                tracing::warn!(%err, "cannot read the proxy's settings; keeping what it has");
                return;
            }
        };
        self.proxy
            .set_answer_timeout((!limit.is_zero()).then_some(limit));
    }

    /// Bind (or rebind, when the settings changed or a fallback is in use) and serve.
    pub async fn apply(&mut self) {
        self.read_settings();
        let wanted = (
            wanted_port(&self.store, "proxy_port", DEFAULT_PROXY_PORT),
            wanted_port(&self.store, "https_port", DEFAULT_HTTPS_PORT),
        );
        // Nothing to do when serving exactly what is asked; a fallback is retried.
        if self.stop.is_some() && wanted == self.wanted && self.serving == wanted {
            return;
        }
        // Close the old listeners before binding: the same port may be wanted again.
        self.stop().await;
        self.wanted = wanted;
        let (tx, rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let workers = worker_count();
        let (http, http_note) = bind_port(wanted.0, HTTP_FALLBACKS, workers);
        let (https, https_note) = match (&self.tls, wanted.1) {
            (Some(_), Some(_)) => bind_port(wanted.1, HTTPS_FALLBACKS, workers),
            (None, Some(_)) => (
                None,
                "HTTPS is off: the local CA could not be set up (see daemon.log)".to_owned(),
            ),
            _ => (None, String::new()),
        };
        let served = (
            http.as_ref().map(|b| b.port),
            https.as_ref().map(|b| b.port),
        );
        let mut sockets: Vec<Sockets> = (0..workers).map(|_| Vec::new()).collect();
        for (bound, tls) in [(http, None), (https, self.tls.clone())] {
            for (mine, theirs) in sockets
                .iter_mut()
                .zip(bound.into_iter().flat_map(|b| b.workers))
            {
                mine.extend(theirs.into_iter().map(|l| (l, tls.clone())));
            }
        }
        for mine in sockets.into_iter().filter(|s| !s.is_empty()) {
            spawn_worker(mine, self.proxy.worker(), rx.clone(), &mut tasks);
        }
        let (http, https) = served;
        for note in [&http_note, &https_note] {
            if !note.is_empty() {
                tracing::warn!(%note, "proxy");
            }
        }
        tracing::info!(?http, ?https, "proxy serving");
        self.proxy.set_ports(http, https);
        self.stop = Some(tx);
        self.tasks = tasks;
        self.serving = (http, https);
        let written = self.store.write(owner::Proxy, |tx| {
            write::proxy::set_status(tx, std::process::id(), http, https, &http_note, &https_note)
        });
        if let Err(err) = written {
            tracing::warn!(%err, "cannot record the proxy's ports");
        }
    }

    /// Stop serving and wait until the listeners are closed.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    /// The ports served on.
    pub fn serving(&self) -> (Option<u16>, Option<u16>) {
        self.serving
    }
}
