//! HTTPS: a local certificate authority made once, and leaf certificates issued per
//! hostname during the TLS handshake.
//!
//! # Guarantees
//! - The CA lives in `$BINKY_HOME/ca`: `ca.crt`, `ca.key` (mode 0600) and `ca.json` (the
//!   parameters its issuer is rebuilt from). It is made once and reused, so a CA the user
//!   trusted (`binky trust`) stays trusted.
//! - A certificate is issued only for a hostname the routing table holds for a project with
//!   `https = true`; any other name (or no SNI) gets no certificate and the handshake fails
//!   with an alert. rustls' own SNI resolver has no such hook: this resolver reads the same
//!   snapshot the proxy routes by.
//! - Issued certificates are cached per hostname for the daemon's lifetime.
//! - Every certificate (the CA's and each leaf) has a serial number of 16 random bytes from
//!   the kernel (`getrandom`); no randomness, no certificate.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Reading or writing the CA files failed.
    #[error("cannot use the local CA in {path}: {source}")]
    Io {
        /// Which file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Generating or parsing a key or certificate failed.
    #[error("certificate error: {0}")]
    Cert(#[from] rcgen::Error),
    /// rustls refused a key.
    #[error("TLS error: {0}")]
    Rustls(#[from] rustls::Error),
    /// The kernel gave no random bytes for a serial number.
    #[error(transparent)]
    Random(#[from] binky_controllers::random::RandomError),
    /// The CA files are damaged.
    #[error("the local CA in {0} is damaged; move the directory away and binky makes a new one (then run `binky trust` again)")]
    Damaged(PathBuf),
}

#[derive(Serialize, Deserialize)]
struct CaMeta {
    common_name: String,
}

/// binky's local certificate authority.
pub struct LocalCa {
    dir: PathBuf,
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "binky (local development)");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// A random serial number (RFC 5280 4.1.2.2: positive, at most 20 octets).
fn serial() -> Result<SerialNumber, TlsError> {
    let mut bytes = binky_controllers::random::bytes::<16>()?;
    bytes[0] &= 0x7f;
    Ok(SerialNumber::from_slice(&bytes))
}

fn write_private(path: &Path, data: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = binky_platform::fs::create_private(path)?;
    f.write_all(data.as_bytes())?;
    f.sync_all()
}

impl LocalCa {
    /// Load the CA in `dir`, making it the first time.
    pub fn load_or_create(dir: &Path) -> Result<LocalCa, TlsError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| TlsError::Io { path, source }
        };
        let (crt, key, meta) = (dir.join("ca.crt"), dir.join("ca.key"), dir.join("ca.json"));
        if !(crt.exists() && key.exists() && meta.exists()) {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
            let _ = binky_platform::fs::restrict_dir(dir);
            let host = binky_platform::user::host();
            let user = binky_platform::user::name();
            let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            let common_name = format!("binky local CA {user}@{} {}", host.trim(), &stamp[..10]);
            let pair = KeyPair::generate()?;
            let mut params = ca_params(&common_name);
            params.serial_number = Some(serial()?);
            let now = time_now();
            params.not_before = now - days(1);
            params.not_after = now + days(3650);
            let cert = params.self_signed(&pair)?;
            // Key first: a crash leaves no certificate without its key.
            write_private(&key, &pair.serialize_pem()).map_err(io(&key))?;
            write_private(
                &meta,
                &serde_json::to_string(&CaMeta { common_name }).unwrap_or_default(),
            )
            .map_err(io(&meta))?;
            std::fs::write(&crt, cert.pem()).map_err(io(&crt))?;
        }
        let cert_pem = std::fs::read_to_string(&crt).map_err(io(&crt))?;
        let key_pem = std::fs::read_to_string(&key).map_err(io(&key))?;
        let meta: CaMeta =
            serde_json::from_str(&std::fs::read_to_string(&meta).map_err(io(&meta))?)
                .map_err(|_| TlsError::Damaged(dir.to_owned()))?;
        let pair = KeyPair::from_pem(&key_pem).map_err(|_| TlsError::Damaged(dir.to_owned()))?;
        let cert_der = pem_to_der(&cert_pem).ok_or_else(|| TlsError::Damaged(dir.to_owned()))?;
        Ok(LocalCa {
            dir: dir.to_owned(),
            cert_pem,
            cert_der,
            issuer: Issuer::new(ca_params(&meta.common_name), pair),
        })
    }

    /// The CA certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate (DER).
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert_der.clone()
    }

    /// Where the CA certificate file is.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A certificate for `host`, signed by this CA (chain: leaf, CA).
    pub fn issue(&self, host: &str) -> Result<Arc<CertifiedKey>, TlsError> {
        let pair = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.serial_number = Some(serial()?);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let now = time_now();
        params.not_before = now - days(1);
        params.not_after = now + days(397);
        let cert = params.signed_by(&pair, &self.issuer)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pair.serialize_der()));
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)?;
        Ok(Arc::new(CertifiedKey::new(
            vec![cert.der().clone(), self.cert_der.clone()],
            signer,
        )))
    }
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn days(n: i64) -> time::Duration {
    time::Duration::days(n)
}

/// The first certificate of a PEM text, as DER.
pub fn pem_to_der(pem: &str) -> Option<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes()).ok()
}

/// Which hostnames may get a certificate.
pub type HostFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Issues certificates during the handshake, for the hosts `allow` accepts.
pub struct HostResolver {
    ca: Arc<LocalCa>,
    allow: HostFilter,
    cache: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl std::fmt::Debug for HostResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostResolver")
    }
}

impl HostResolver {
    /// A resolver signing with `ca` for the names `allow` accepts.
    pub fn new(ca: Arc<LocalCa>, allow: HostFilter) -> Self {
        HostResolver {
            ca,
            allow,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The certificate for `host`, if it may have one.
    pub fn for_host(&self, host: &str) -> Option<Arc<CertifiedKey>> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if !(self.allow)(&host) {
            return None;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = cache.get(&host) {
            return Some(k.clone());
        }
        match self.ca.issue(&host) {
            Ok(k) => {
                cache.insert(host, k.clone());
                Some(k)
            }
            Err(err) => {
                tracing::warn!(%host, %err, "cannot issue a certificate");
                None
            }
        }
    }
}

impl ResolvesServerCert for HostResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.for_host(hello.server_name()?)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The proxy's TLS configuration: h2 and HTTP/1.1 by ALPN, certificates from `resolver`.
pub fn server_config(resolver: Arc<HostResolver>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A client configuration that trusts only `ca` (for `binky curl` and tests).
pub fn client_config(
    ca_der: CertificateDer<'static>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der)?;
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_made_once_with_a_private_key_and_signs_leaves_a_client_accepts() {
        use rustls::client::danger::ServerCertVerifier;
        let dir = tempfile::tempdir().unwrap();
        let ca = LocalCa::load_or_create(&dir.path().join("ca")).unwrap();
        let mode =
            binky_platform::fs::mode(&std::fs::metadata(dir.path().join("ca/ca.key")).unwrap());
        assert_eq!(mode, cfg!(unix).then_some(0o600));
        let again = LocalCa::load_or_create(&dir.path().join("ca")).unwrap();
        assert_eq!(ca.cert_pem(), again.cert_pem(), "the CA was made twice");

        // A leaf issued by the reloaded CA verifies against the saved CA certificate.
        let leaf = again.issue("web.w.acme.localhost").unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .unwrap();
        let name = rustls::pki_types::ServerName::try_from("web.w.acme.localhost").unwrap();
        verifier
            .verify_server_cert(
                &leaf.cert[0],
                &leaf.cert[1..],
                &name,
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .unwrap();
        let other = rustls::pki_types::ServerName::try_from("api.w.acme.localhost").unwrap();
        assert!(verifier
            .verify_server_cert(
                &leaf.cert[0],
                &leaf.cert[1..],
                &other,
                &[],
                rustls::pki_types::UnixTime::now()
            )
            .is_err());
    }

    #[test]
    fn only_allowed_hosts_get_a_certificate_and_it_is_cached() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Arc::new(LocalCa::load_or_create(dir.path()).unwrap());
        let r = HostResolver::new(ca, Arc::new(|h: &str| h.ends_with(".acme.localhost")));
        let a = r.for_host("WEB.w.acme.localhost.").unwrap();
        let b = r.for_host("web.w.acme.localhost").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(r.for_host("evil.example.com").is_none());
    }
}
