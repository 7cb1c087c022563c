//! The `s3` adapter (also answering to `minio`): a bucket per world, or a prefix per world
//! in one shared bucket, on any S3-compatible server (AWS S3, MinIO, Ceph RGW, moto, …).
//!
//! A slice `bk_acme_login_fix_files` is the bucket `bk-acme-login-fix-files` (`_` becomes
//! `-`; S3 bucket names are 3–63 characters of `[a-z0-9-]`, so a name that cannot be used
//! as is is cut and ended with a hash). With `options.bucket = "shared"` it is instead the
//! prefix `bk_acme_login_fix_files/` inside the bucket `shared` (binky creates that bucket
//! when it is missing and never deletes it). Each entry of the service's
//! `buckets = ["uploads", …]` becomes a prefix with an empty marker object
//! (`uploads/`, or `bk_…_files/uploads/` in prefix mode), as binky 0.1.2 did.
//!
//! # Configuration
//! - `admin_url = "http://ACCESS_KEY:SECRET@HOST:PORT"`: the endpoint, with the admin
//!   credentials as its userinfo (percent-encode `/`, `+` and `@` in a secret). Without it,
//!   `options.endpoint_url`, then `$AWS_ENDPOINT_URL_S3`, then `$AWS_ENDPOINT_URL`; with
//!   none of them the adapter talks to AWS itself (`https://s3.<region>.amazonaws.com`).
//! - Credentials, first found: admin_url's userinfo; `options.access_key_id` /
//!   `options.secret_access_key` (or 0.1.2's `access_key` / `secret_key`);
//!   `$AWS_ACCESS_KEY_ID` / `$AWS_SECRET_ACCESS_KEY` (+ `$AWS_SESSION_TOKEN`) of the daemon.
//!   There is no profile, SSO or instance-metadata lookup (no `aws-config` crate).
//! - `options.region`, else `$AWS_REGION`, `$AWS_DEFAULT_REGION`, else `us-east-1`.
//! - `options.bucket`: a shared bucket; slices become prefixes in it (see above).
//!
//! # The address
//! `${files.url}` is `s3://<bucket>` (prefix mode: `s3://<bucket>/<prefix>`), the value
//! binky 0.1.2 gave, so existing binky.toml files keep working; it is also the one form
//! that names the slice whole in both modes and that the AWS CLI, s3fs/fsspec, DuckDB,
//! Spark and rclone take as is. An S3 client needs an endpoint and keys besides, and S3
//! has no URL form that carries them, so they are tokens: `${files.endpoint}` (what SDKs
//! take as `endpoint_url`; a custom endpoint wants path-style addressing),
//! `${files.region}`, `${files.bucket}`, `${files.prefix}` (empty in bucket mode),
//! `${files.access_key_id}`, `${files.secret_access_key}`.
//!
//! # Isolation: by name, not by credentials
//! S3 has no per-bucket users: separate keys need IAM (AWS) or MinIO's admin API (whose
//! payloads are encrypted with the admin secret — future work), so **every world gets the
//! admin keys**. Worlds are kept apart by naming only: a world that uses its own
//! `${files.bucket}`/`${files.prefix}` never meets another world's objects, but nothing
//! stops a process that ignores them from reading or deleting any bucket those keys reach.
//! Give binky keys limited to `bk-*` buckets (or to the shared bucket) where that matters.
//!
//! # Guarantees
//! - Provision is idempotent: an existing bucket of ours is kept; a name taken by another
//!   account is an error that says so.
//! - Teardown leaves nothing: every object version and delete marker (versioned buckets)
//!   and every unfinished multipart upload, deleted 1000 at a time, then the bucket (in
//!   prefix mode only what is under the prefix). A bucket already gone is success.
//! - Errors never carry the secret key; a server that does not answer, or that refuses the
//!   keys, is [`AdapterError::Unreachable`] (retried).
//!
//! # Caveats
//! - No clone: copying objects is not server-side in bulk, and worlds rarely need golden
//!   objects (binky 0.1.2 copied them one by one).
//! - Bucket names are global on AWS: `bk-<project>-<world>-<service>` may be taken by
//!   another account; use `options.bucket` then.
//! - Objects under S3 Object Lock cannot be deleted; teardown reports the error.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration, ObjectIdentifier};
use aws_sdk_s3::Client;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use sha2::{Digest, Sha256};

use super::http::Endpoint;
use super::{
    redact, Adapter, AdapterConfig, AdapterError, Address, BoxFuture, Capabilities, Slice,
};

/// `DeleteObjects` takes at most this many keys; list pages are no larger.
const BATCH: i32 = 1000;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one attempt may wait for the first byte of an answer.
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one operation may take, retries included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(60);
/// Error codes meaning the keys are wrong (not merely lacking a permission).
const BAD_KEYS: &[&str] = &[
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "InvalidClientTokenId",
];
/// Suffixes AWS reserves in bucket names (the reserved prefixes `xn--` and `sthree-` are
/// checked in [`bucket_name`]).
const RESERVED_SUFFIXES: &[&str] = &["-s3alias", "--ol-s3", "--x-s3", "--table-s3"];

/// The s3 (and minio) adapter.
pub struct S3;

/// The bucket for a slice in bucket mode: `_` → `-`, within S3's rules, ending with 8 hex
/// digits of the slice name's SHA-256 where it had to be changed beyond that.
pub fn bucket_name(slice_name: &str) -> String {
    let mapped = slice_name.replace('_', "-");
    let trimmed = mapped.trim_matches('-');
    let usable = trimmed.len() >= 3
        && trimmed.len() == mapped.len()
        && mapped.len() <= 63
        && !RESERVED_SUFFIXES.iter().any(|s| mapped.ends_with(s))
        && !mapped.starts_with("xn--")
        && !mapped.starts_with("sthree-");
    if usable {
        return mapped;
    }
    let digest = Sha256::digest(slice_name.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let head: String = trimmed.chars().take(63 - 9).collect();
    let head = head.trim_end_matches('-');
    if head.is_empty() {
        format!("bk-{hash}")
    } else {
        format!("{head}-{hash}")
    }
}

/// The slice whose bucket is `bucket`, if `bucket` is one binky names that way (for `list`,
/// whose names `binky gc` compares with slice names and hands back to `teardown`).
pub fn slice_of_bucket(bucket: &str) -> Option<String> {
    if !bucket.starts_with("bk-") {
        return None;
    }
    let plain = bucket.replace('-', "_");
    // A hashed name first: its slice is what is before the hash, when that maps back here
    // (`bk_x_s3alias_<hash>` also maps to itself, but is not the slice's name).
    // Trailing `_`s were trimmed before the hash was added: try them back.
    if let Some((head, _)) = plain.rsplit_once('_') {
        for trailing in 0..4 {
            let candidate = format!("{head}{}", "_".repeat(trailing));
            if bucket_name(&candidate) == bucket {
                return Some(candidate);
            }
        }
    }
    (bucket_name(&plain) == bucket).then_some(plain)
}

/// The prefix of a slice in prefix mode.
pub fn prefix_of(slice: &Slice) -> String {
    format!("{}/", slice.name)
}

/// Where the slice lives.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Place {
    /// A bucket of its own.
    Bucket(String),
    /// A prefix in a shared bucket.
    Prefix { bucket: String, prefix: String },
}

impl Place {
    fn bucket(&self) -> &str {
        match self {
            Place::Bucket(b) | Place::Prefix { bucket: b, .. } => b,
        }
    }

    fn prefix(&self) -> &str {
        match self {
            Place::Bucket(_) => "",
            Place::Prefix { prefix, .. } => prefix,
        }
    }
}

/// Everything the adapter needs to talk to the server, from the configuration.
struct Settings {
    /// The endpoint without credentials (`http://127.0.0.1:9000`); `None`: AWS.
    endpoint: Option<String>,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    /// `options.bucket`.
    shared_bucket: Option<String>,
}

/// Reads the environment (a function so unit tests can pass their own).
type EnvFn<'a> = &'a dyn Fn(&str) -> Option<String>;

fn real_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Settings {
    fn from_config(cfg: &AdapterConfig, env: EnvFn<'_>) -> Result<Settings, AdapterError> {
        let opt = |k: &str| cfg.options.get(k).filter(|v| !v.is_empty()).cloned();
        let mut endpoint = None;
        let mut from_url = None;
        if let Some(url) = cfg.admin_url.as_deref().filter(|u| !u.is_empty()) {
            let default_port = if url.to_ascii_lowercase().starts_with("https://") {
                443
            } else {
                80
            };
            let ep = Endpoint::parse(url, default_port).map_err(|_| {
                AdapterError::Config(format!(
                    "admin_url `{}` is not an S3 endpoint: write it as \
                     http://ACCESS_KEY:SECRET@HOST:PORT",
                    redact(url)
                ))
            })?;
            // The port as written: `https://s3.example`, not `https://s3.example:443`.
            let url = ep.url("");
            let default = format!(":{default_port}");
            endpoint = Some(match url.strip_suffix(&default) {
                Some(bare) if ep.base_path.is_empty() => bare.to_owned(),
                _ => url,
            });
            if let Some(user) = ep.user.clone() {
                from_url = Some((user, ep.password.clone().unwrap_or_default()));
            }
        }
        let endpoint = match endpoint {
            Some(e) => Some(e),
            None => opt("endpoint_url")
                .or_else(|| env("AWS_ENDPOINT_URL_S3"))
                .or_else(|| env("AWS_ENDPOINT_URL"))
                .map(|e| {
                    let e = e.trim_end_matches('/');
                    // Credentials in these are not expected, and never shown.
                    super::without_credentials(e)
                }),
        };
        let from_options = opt("access_key_id")
            .or_else(|| opt("access_key"))
            .zip(opt("secret_access_key").or_else(|| opt("secret_key")));
        let (keys, session_token) = match (from_url, from_options) {
            (Some(k), _) => (Some(k), None),
            (None, Some(k)) => (Some(k), None),
            (None, None) => (
                env("AWS_ACCESS_KEY_ID").zip(env("AWS_SECRET_ACCESS_KEY")),
                env("AWS_SESSION_TOKEN"),
            ),
        };
        let Some((access_key_id, secret_access_key)) = keys else {
            return Err(AdapterError::Config(
                "the s3 adapter needs access keys: write them into admin_url \
                 (`admin_url = \"http://ACCESS_KEY:SECRET@HOST:PORT\"`), or set \
                 options.access_key_id and options.secret_access_key, or \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the daemon's environment"
                    .into(),
            ));
        };
        if secret_access_key.is_empty() {
            return Err(AdapterError::Config(
                "the s3 adapter's access key has no secret: write admin_url as \
                 http://ACCESS_KEY:SECRET@HOST:PORT"
                    .into(),
            ));
        }
        let region = opt("region")
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".to_owned());
        let shared_bucket = opt("bucket");
        if let Some(b) = &shared_bucket {
            check_bucket(b)?;
        }
        Ok(Settings {
            endpoint,
            region,
            access_key_id,
            secret_access_key,
            session_token,
            shared_bucket,
        })
    }

    /// The slice's bucket or prefix.
    fn place(&self, slice: &Slice) -> Place {
        match &self.shared_bucket {
            Some(b) => Place::Prefix {
                bucket: b.clone(),
                prefix: prefix_of(slice),
            },
            None => Place::Bucket(bucket_name(&slice.name)),
        }
    }

    /// The endpoint shown in messages and handed to worlds.
    fn shown(&self) -> String {
        match &self.endpoint {
            Some(e) => e.clone(),
            None => format!("https://s3.{}.amazonaws.com", self.region),
        }
    }

    fn client(&self) -> Client {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let mut b = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http)
            .region(Region::new(self.region.clone()))
            .credentials_provider(Credentials::new(
                &self.access_key_id,
                &self.secret_access_key,
                self.session_token.clone(),
                None,
                "binky",
            ))
            // The adapter's caller retries transient errors with its own backoff; a few
            // quick attempts here ride out a dropped connection.
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(200)),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .read_timeout(READ_TIMEOUT)
                    .operation_timeout(OPERATION_TIMEOUT)
                    .build(),
            )
            // Checksums only where the API demands one (DeleteObjects): many S3-compatible
            // servers reject the newer default checksum headers.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        if let Some(e) = &self.endpoint {
            // `bucket.host` names do not resolve for a local or self-hosted server.
            b = b.endpoint_url(e).force_path_style(true);
        }
        Client::from_conf(b.build())
    }
}

/// An error and its sources, each said once (`dispatch failure: io error: … Connection
/// refused`), without the Debug dump the SDK's own context display adds.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// A bucket name given by the user (`options.bucket`), checked against S3's rules.
fn check_bucket(name: &str) -> Result<(), AdapterError> {
    let ok = (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.'])
        && !name.contains("..");
    if ok {
        Ok(())
    } else {
        Err(AdapterError::Config(format!(
            "options.bucket `{name}` is not a valid S3 bucket name: 3–63 characters of \
             lower-case letters, digits, `-` and `.`, starting and ending with a letter or digit"
        )))
    }
}

/// Slice names are `[a-z0-9_]`; anything else could escape its prefix (`/`, `..`).
use super::check_plain_name as check_name;

/// One adapter call's connection to the server.
struct Server {
    settings: Settings,
    client: Client,
    shown: String,
}

/// What an S3 error was.
#[derive(Debug)]
struct Failure {
    /// The HTTP status, when there was an answer.
    status: Option<u16>,
    /// The S3 error code (`NoSuchBucket`), when the answer had one.
    code: Option<String>,
    /// The adapter error it amounts to.
    error: AdapterError,
}

impl Server {
    fn new(cfg: &AdapterConfig) -> Result<Server, AdapterError> {
        let settings = Settings::from_config(cfg, &real_env)?;
        let client = settings.client();
        let shown = settings.shown();
        Ok(Server {
            settings,
            client,
            shown,
        })
    }

    fn scrub(&self, text: &str) -> String {
        super::scrub(
            text,
            [
                Some(&self.settings.secret_access_key),
                self.settings.session_token.as_ref(),
            ]
            .into_iter()
            .flatten()
            .map(String::as_str),
        )
    }

    /// Classify an SDK error: no answer and refused keys are transient, the rest is the
    /// server's answer.
    fn fail<E>(
        &self,
        doing: &str,
        err: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> Failure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        let code = match &err {
            SdkError::ServiceError(e) => e.err().code().map(str::to_owned),
            _ => None,
        };
        let text = match &err {
            SdkError::ServiceError(e) => match (e.err().code(), e.err().message()) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (Some(c), None) => c.to_owned(),
                _ => format!("HTTP {}", status.unwrap_or_default()),
            },
            other => error_chain(other),
        };
        let text = self.scrub(&text);
        let server = self.shown.clone();
        let error = match &err {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => AdapterError::Unreachable {
                server,
                detail: format!("{doing}: {text}"),
            },
            SdkError::ConstructionFailure(_) => {
                AdapterError::Config(format!("{server}: {doing}: {text}"))
            }
            _ if code.as_deref().is_some_and(|c| BAD_KEYS.contains(&c)) => {
                AdapterError::Unreachable {
                    server,
                    detail: format!(
                        "{doing}: the server refused the access keys ({}); check the \
                         ACCESS_KEY:SECRET in admin_url (http://ACCESS_KEY:SECRET@HOST:PORT, \
                         secret percent-encoded), or options.access_key_id / \
                         options.secret_access_key",
                        code.as_deref().unwrap_or_default()
                    ),
                }
            }
            // 503 SlowDown and friends: the server is there but asks to come back.
            _ if status.is_some_and(|s| s >= 500) => AdapterError::Unreachable {
                server,
                detail: format!("{doing}: {text}"),
            },
            _ => {
                let hint = if code.as_deref() == Some("AccessDenied") || status == Some(403) {
                    "; the keys need s3:CreateBucket, s3:DeleteBucket, s3:ListBucket, \
                     s3:ListBucketVersions, s3:PutObject, s3:DeleteObject, \
                     s3:DeleteObjectVersion and s3:ListAllMyBuckets on binky's buckets"
                } else {
                    ""
                };
                AdapterError::Server {
                    server,
                    detail: format!("{doing}: {text}{hint}"),
                }
            }
        };
        Failure {
            status,
            code,
            error,
        }
    }

    /// Does `bucket` exist (and may we use it)?
    async fn bucket_exists(&self, bucket: &str) -> Result<bool, AdapterError> {
        let head = match self.client.head_bucket().bucket(bucket).send().await {
            Ok(_) => return Ok(true),
            Err(e) => self.fail(&format!("HeadBucket {bucket}"), e),
        };
        match head.status {
            Some(404) => return Ok(false),
            Some(403) => {}
            _ => return Err(head.error),
        }
        // A HEAD answer has no body, so 403 says neither whose bucket it is nor whether
        // the keys are wrong: ask again with a request whose error carries a code.
        let probe = self
            .client
            .list_objects_v2()
            .bucket(bucket)
            .max_keys(1)
            .send()
            .await;
        match probe {
            Ok(_) => Ok(true),
            Err(e) => {
                let f = self.fail(&format!("ListObjectsV2 {bucket}"), e);
                match f.code.as_deref() {
                    Some("NoSuchBucket") => Ok(false),
                    Some("AccessDenied") => Err(self.taken(bucket)),
                    _ => Err(f.error),
                }
            }
        }
    }

    fn taken(&self, bucket: &str) -> AdapterError {
        AdapterError::Server {
            server: self.shown.clone(),
            detail: format!(
                "the bucket `{bucket}` exists and the keys may not use it: it belongs to \
                 another account (bucket names are global on AWS; set `options = {{ bucket \
                 = \"<a bucket you own>\" }}` to give each world a prefix in it instead, or \
                 rename the project), or a bucket policy denies the keys s3:ListBucket"
            ),
        }
    }

    /// Create `bucket` unless it is there.
    async fn ensure_bucket(&self, bucket: &str) -> Result<(), AdapterError> {
        if self.bucket_exists(bucket).await? {
            return Ok(());
        }
        let mut req = self.client.create_bucket().bucket(bucket);
        // AWS wants the region named, except for us-east-1, which refuses it. Other
        // servers take the region of the signature (as binky 0.1.2 assumed).
        if self.settings.endpoint.is_none() && self.settings.region != "us-east-1" {
            req = req.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(
                        self.settings.region.as_str(),
                    ))
                    .build(),
            );
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) => {
                let f = self.fail(&format!("CreateBucket {bucket}"), e);
                match f.code.as_deref() {
                    Some("BucketAlreadyOwnedByYou") => Ok(()),
                    Some("BucketAlreadyExists") => Err(self.taken(bucket)),
                    _ => Err(f.error),
                }
            }
        }
    }

    /// An empty marker object.
    async fn put_marker(&self, bucket: &str, key: &str) -> Result<(), AdapterError> {
        self.client
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(ByteStream::from_static(b""))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.fail(&format!("PutObject {bucket}/{key}"), e).error)
    }

    /// Delete every object version, delete marker and unfinished upload under `prefix`
    /// (`""`: the whole bucket). `Ok(false)`: the bucket is gone.
    async fn sweep(&self, bucket: &str, prefix: &str) -> Result<bool, AdapterError> {
        let mut versioned_listing = true;
        loop {
            // Always the first page: what was listed is deleted before the next round,
            // so no continuation marker is needed and nothing is skipped.
            let batch = if versioned_listing {
                match self.first_versions(bucket, prefix).await {
                    Ok(b) => b,
                    Err(f) if f.code.as_deref() == Some("NotImplemented") => {
                        versioned_listing = false;
                        continue;
                    }
                    Err(f) if f.code.as_deref() == Some("NoSuchBucket") => return Ok(false),
                    Err(f) => return Err(f.error),
                }
            } else {
                match self.first_objects(bucket, prefix).await {
                    Ok(b) => b,
                    Err(f) if f.code.as_deref() == Some("NoSuchBucket") => return Ok(false),
                    Err(f) => return Err(f.error),
                }
            };
            if batch.is_empty() {
                break;
            }
            let n = batch.len();
            let delete = aws_sdk_s3::types::Delete::builder()
                .set_objects(Some(batch))
                .quiet(true)
                .build()
                .map_err(|e| AdapterError::Config(format!("DeleteObjects {bucket}: {e}")))?;
            let out = match self
                .client
                .delete_objects()
                .bucket(bucket)
                .delete(delete)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) => {
                    let f = self.fail(&format!("DeleteObjects {bucket} ({n} keys)"), e);
                    if f.code.as_deref() == Some("NoSuchBucket") {
                        return Ok(false);
                    }
                    return Err(f.error);
                }
            };
            if let Some(first) = out.errors().first() {
                return Err(AdapterError::Server {
                    server: self.shown.clone(),
                    detail: format!(
                        "DeleteObjects {bucket}: {} of {n} keys were not deleted, first \
                         `{}`: {} {}",
                        out.errors().len(),
                        first.key().unwrap_or_default(),
                        first.code().unwrap_or_default(),
                        first.message().unwrap_or_default()
                    ),
                });
            }
        }
        self.abort_uploads(bucket, prefix).await
    }

    /// Up to [`BATCH`] object versions and delete markers under `prefix`.
    async fn first_versions(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<ObjectIdentifier>, Failure> {
        let mut req = self
            .client
            .list_object_versions()
            .bucket(bucket)
            .max_keys(BATCH);
        if !prefix.is_empty() {
            req = req.prefix(prefix);
        }
        let out = req
            .send()
            .await
            .map_err(|e| self.fail(&format!("ListObjectVersions {bucket}"), e))?;
        let versions = out.versions().iter().map(|v| (v.key(), v.version_id()));
        let markers = out
            .delete_markers()
            .iter()
            .map(|m| (m.key(), m.version_id()));
        Ok(versions
            .chain(markers)
            .filter_map(|(key, version)| {
                ObjectIdentifier::builder()
                    .key(key?)
                    .set_version_id(version.map(str::to_owned))
                    .build()
                    .ok()
            })
            .take(BATCH as usize)
            .collect())
    }

    /// Up to [`BATCH`] objects under `prefix` (servers without versioning support).
    async fn first_objects(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<ObjectIdentifier>, Failure> {
        let mut req = self.client.list_objects_v2().bucket(bucket).max_keys(BATCH);
        if !prefix.is_empty() {
            req = req.prefix(prefix);
        }
        let out = req
            .send()
            .await
            .map_err(|e| self.fail(&format!("ListObjectsV2 {bucket}"), e))?;
        Ok(out
            .contents()
            .iter()
            .filter_map(|o| ObjectIdentifier::builder().key(o.key()?).build().ok())
            .collect())
    }

    /// Abort the unfinished multipart uploads under `prefix` (their parts are stored and
    /// billed, and some servers refuse to delete a bucket that has them).
    async fn abort_uploads(&self, bucket: &str, prefix: &str) -> Result<bool, AdapterError> {
        loop {
            let mut req = self.client.list_multipart_uploads().bucket(bucket);
            if !prefix.is_empty() {
                req = req.prefix(prefix);
            }
            let out = match req.send().await {
                Ok(out) => out,
                Err(e) => {
                    let f = self.fail(&format!("ListMultipartUploads {bucket}"), e);
                    return match f.code.as_deref() {
                        Some("NoSuchBucket") => Ok(false),
                        // A server without multipart listing has none to leave behind.
                        Some("NotImplemented") => Ok(true),
                        _ => Err(f.error),
                    };
                }
            };
            if out.uploads().is_empty() {
                return Ok(true);
            }
            for u in out.uploads() {
                let (Some(key), Some(id)) = (u.key(), u.upload_id()) else {
                    continue;
                };
                if let Err(e) = self
                    .client
                    .abort_multipart_upload()
                    .bucket(bucket)
                    .key(key)
                    .upload_id(id)
                    .send()
                    .await
                {
                    let f = self.fail(&format!("AbortMultipartUpload {bucket}/{key}"), e);
                    if !matches!(f.code.as_deref(), Some("NoSuchUpload")) {
                        return Err(f.error);
                    }
                }
            }
        }
    }

    /// Delete the bucket; `Ok(false)` when something was written into it meanwhile.
    async fn delete_bucket(&self, bucket: &str) -> Result<bool, AdapterError> {
        match self.client.delete_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(true),
            Err(e) => {
                let f = self.fail(&format!("DeleteBucket {bucket}"), e);
                match f.code.as_deref() {
                    Some("NoSuchBucket") => Ok(true),
                    Some("BucketNotEmpty") => Ok(false),
                    _ => Err(f.error),
                }
            }
        }
    }
}

impl Adapter for S3 {
    fn names(&self) -> &'static [&'static str] {
        &["s3", "minio"]
    }

    fn capabilities<'a>(
        &'a self,
        _cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Capabilities, AdapterError>> {
        Box::pin(async { Ok(Capabilities { clone: false }) })
    }

    fn provision<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let server = Server::new(cfg)?;
            let place = server.settings.place(slice);
            server.ensure_bucket(place.bucket()).await?;
            if let Place::Prefix { bucket, prefix } = &place {
                // Lets `list` find the slice while it holds nothing else.
                server.put_marker(bucket, prefix).await?;
            }
            for b in &cfg.buckets {
                let b = b.trim_matches('/');
                if !b.is_empty() {
                    let key = format!("{}{b}/", place.prefix());
                    server.put_marker(place.bucket(), &key).await?;
                }
            }
            Ok(())
        })
    }

    fn resolve<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Address, AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let s = Settings::from_config(cfg, &real_env)?;
            let place = s.place(slice);
            let url = match &place {
                Place::Bucket(b) => format!("s3://{b}"),
                Place::Prefix { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
            };
            let tokens = BTreeMap::from([
                ("bucket".to_owned(), place.bucket().to_owned()),
                ("prefix".to_owned(), place.prefix().to_owned()),
                ("endpoint".to_owned(), s.shown()),
                ("region".to_owned(), s.region.clone()),
                ("access_key_id".to_owned(), s.access_key_id.clone()),
                ("secret_access_key".to_owned(), s.secret_access_key.clone()),
            ]);
            Ok(Address { url, tokens })
        })
    }

    fn teardown<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<(), AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let server = Server::new(cfg)?;
            match server.settings.place(slice) {
                Place::Prefix { bucket, prefix } => {
                    server.sweep(&bucket, &prefix).await?;
                    Ok(())
                }
                Place::Bucket(bucket) => {
                    // A world process still writing (teardown runs after the world's
                    // processes stopped, but an outside writer may not have) makes
                    // DeleteBucket answer BucketNotEmpty: sweep again, a few times.
                    for _ in 0..3 {
                        if !server.sweep(&bucket, "").await? {
                            return Ok(());
                        }
                        if server.delete_bucket(&bucket).await? {
                            return Ok(());
                        }
                    }
                    Err(AdapterError::Server {
                        server: server.shown.clone(),
                        detail: format!(
                            "DeleteBucket {bucket}: objects keep appearing in it; stop \
                             whatever writes there and remove the world again"
                        ),
                    })
                }
            }
        })
    }

    fn list<'a>(
        &'a self,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Vec<String>, AdapterError>> {
        Box::pin(async move {
            let server = Server::new(cfg)?;
            let mut names = Vec::new();
            let mut token: Option<String> = None;
            if let Some(bucket) = &server.settings.shared_bucket {
                loop {
                    let out = server
                        .client
                        .list_objects_v2()
                        .bucket(bucket)
                        .prefix("bk_")
                        .delimiter("/")
                        .set_continuation_token(token.take())
                        .send()
                        .await;
                    let out = match out {
                        Ok(o) => o,
                        Err(e) => {
                            let f = server.fail(&format!("ListObjectsV2 {bucket}"), e);
                            if f.code.as_deref() == Some("NoSuchBucket") {
                                return Ok(names);
                            }
                            return Err(f.error);
                        }
                    };
                    names.extend(
                        out.common_prefixes()
                            .iter()
                            .filter_map(|p| p.prefix()?.strip_suffix('/'))
                            .map(str::to_owned),
                    );
                    match out.next_continuation_token() {
                        Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_owned()),
                        _ => return Ok(names),
                    }
                }
            }
            loop {
                let out = server
                    .client
                    .list_buckets()
                    .prefix("bk-")
                    .set_continuation_token(token.take())
                    .send()
                    .await
                    .map_err(|e| server.fail("ListBuckets", e).error)?;
                names.extend(
                    out.buckets()
                        .iter()
                        .filter_map(|b| slice_of_bucket(b.name()?)),
                );
                match out.continuation_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                    _ => return Ok(names),
                }
            }
        })
    }

    fn exists<'a>(
        &'a self,
        slice: &'a Slice,
        cfg: &'a AdapterConfig,
    ) -> BoxFuture<'a, Result<Option<bool>, AdapterError>> {
        Box::pin(async move {
            check_name(slice)?;
            let server = Server::new(cfg)?;
            match server.settings.place(slice) {
                Place::Bucket(bucket) => server.bucket_exists(&bucket).await.map(Some),
                // A prefix has no existence of its own (a world may delete its marker):
                // only a vanished shared bucket says the slice is gone.
                Place::Prefix { bucket, .. } => Ok(if server.bucket_exists(&bucket).await? {
                    None
                } else {
                    Some(false)
                }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str) -> Slice {
        Slice {
            name: name.into(),
            secret: "unused".into(),
        }
    }

    fn cfg(url: Option<&str>, options: &[(&str, &str)]) -> AdapterConfig {
        AdapterConfig {
            admin_url: url.map(str::to_owned),
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            buckets: vec![],
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn bucket_names_follow_s3_rules_and_map_back_to_their_slice() {
        assert_eq!(
            bucket_name("bk_acme_login_fix_files"),
            "bk-acme-login-fix-files"
        );
        assert_eq!(
            slice_of_bucket("bk-acme-login-fix-files").as_deref(),
            Some("bk_acme_login_fix_files")
        );
        for name in [
            "bk_acme_w_s3alias",
            "bk_acme_w__ol_s3",
            "bk_x_",
            "bk_files__",
            "bk",
            &format!("bk_{}", "p".repeat(70)),
        ] {
            let b = bucket_name(name);
            assert!((3..=63).contains(&b.len()), "{b}");
            assert!(
                b.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'),
                "{b}"
            );
            assert!(!b.starts_with('-') && !b.ends_with('-'), "{b}");
            assert!(!RESERVED_SUFFIXES.iter().any(|s| b.ends_with(s)), "{b}");
            if name.starts_with("bk_") && name.len() <= 63 {
                assert_eq!(slice_of_bucket(&b).as_deref(), Some(name), "{b}");
            }
        }
        assert_ne!(
            bucket_name("bk_acme_w_s3alias"),
            bucket_name("bk_acme_w_s3alias_")
        );
        assert_eq!(slice_of_bucket("photos"), None);
    }

    #[test]
    fn admin_url_gives_endpoint_and_keys_and_options_fill_the_rest() {
        let s = Settings::from_config(
            &cfg(
                Some("http://AKID:se%2Fcret@127.0.0.1:9000/"),
                &[("region", "eu-west-1")],
            ),
            &no_env,
        )
        .unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.access_key_id, "AKID");
        assert_eq!(s.secret_access_key, "se/cret");
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(
            s.place(&slice("bk_a_b_files")),
            Place::Bucket("bk-a-b-files".into())
        );

        // 0.1.2's option names, and the environment as the last resort.
        let env = |k: &str| match k {
            "AWS_DEFAULT_REGION" => Some("ap-south-1".to_owned()),
            "AWS_ACCESS_KEY_ID" => Some("ENVKEY".to_owned()),
            "AWS_SECRET_ACCESS_KEY" => Some("envsecret".to_owned()),
            _ => None,
        };
        let s = Settings::from_config(
            &cfg(
                None,
                &[
                    ("endpoint_url", "http://minio:9000/"),
                    ("access_key", "OLD"),
                    ("secret_key", "oldsecret"),
                    ("bucket", "shared"),
                ],
            ),
            &env,
        )
        .unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("http://minio:9000"));
        assert_eq!(
            (s.access_key_id.as_str(), s.region.as_str()),
            ("OLD", "ap-south-1")
        );
        assert_eq!(
            s.place(&slice("bk_a_b_files")),
            Place::Prefix {
                bucket: "shared".into(),
                prefix: "bk_a_b_files/".into()
            }
        );
        let s = Settings::from_config(&cfg(None, &[]), &env).unwrap();
        assert_eq!(s.endpoint, None);
        assert_eq!(s.shown(), "https://s3.ap-south-1.amazonaws.com");
        assert_eq!(s.access_key_id, "ENVKEY");
    }

    #[test]
    fn missing_keys_and_bad_settings_name_the_fix_without_the_secret() {
        let e = Settings::from_config(&cfg(Some("http://127.0.0.1:9000"), &[]), &no_env)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("ACCESS_KEY:SECRET") && e.contains("AWS_ACCESS_KEY_ID"),
            "{e}"
        );
        let e = Settings::from_config(&cfg(Some("ftp://AK:topsecret@h"), &[]), &no_env)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("http://ACCESS_KEY:SECRET@HOST:PORT"), "{e}");
        assert!(!e.contains("topsecret"), "{e}");
        let e = Settings::from_config(
            &cfg(Some("http://AK:topsecret@h"), &[("bucket", "Bad_Name")]),
            &no_env,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("options.bucket") && !e.contains("topsecret"),
            "{e}"
        );
    }

    #[test]
    fn the_address_is_0_1_2s_s3_url_plus_what_a_client_needs() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let a = rt
            .block_on(S3.resolve(
                &slice("bk_acme_w_files"),
                &cfg(Some("http://AK:sk@127.0.0.1:9000"), &[]),
            ))
            .unwrap();
        assert_eq!(a.url, "s3://bk-acme-w-files");
        assert_eq!(a.tokens["bucket"], "bk-acme-w-files");
        assert_eq!(a.tokens["prefix"], "");
        assert_eq!(a.tokens["endpoint"], "http://127.0.0.1:9000");
        assert_eq!(a.tokens["region"], "us-east-1");
        assert_eq!(a.tokens["access_key_id"], "AK");
        assert_eq!(a.tokens["secret_access_key"], "sk");
        let a = rt
            .block_on(S3.resolve(
                &slice("bk_acme_w_files"),
                &cfg(Some("https://AK:sk@s3.example"), &[("bucket", "shared")]),
            ))
            .unwrap();
        assert_eq!(a.url, "s3://shared/bk_acme_w_files/");
        assert_eq!(a.tokens["prefix"], "bk_acme_w_files/");
        assert_eq!(a.tokens["endpoint"], "https://s3.example");
        let e = rt
            .block_on(S3.resolve(&slice("bk_a/../b"), &cfg(Some("http://AK:sk@h"), &[])))
            .unwrap_err();
        assert!(matches!(e, AdapterError::Config(_)), "{e}");
    }
}
