//! The `s3` adapter (also answering to `minio`): a bucket per world, or a prefix per world
//! in one shared bucket, on any S3-compatible server (AWS S3, MinIO, Ceph RGW, moto, …).
//!
//! A slice `bk_acme_login_fix_files` is the bucket `bk-acme-login-fix-files` (`_` becomes
//! `-`; S3 bucket names are 3–63 characters of `[a-z0-9-]`, so a name that cannot be used
//! as is is cut and ended with a hash). With `options.bucket = "shared"` it is instead the
//! prefix `bk_acme_login_fix_files/` inside the bucket `shared` (binky creates that bucket
//! when it is missing and never deletes it). Each entry of the service's
//! `buckets = ["uploads", …]` becomes a prefix with an empty marker object
//! (`uploads/`, or `bk_…_files/uploads/` in prefix mode).
//!
//! # Configuration
//! - `admin_url = "http://ACCESS_KEY:SECRET@HOST:PORT"`: the endpoint, with the admin
//!   credentials as its userinfo (percent-encode `/`, `+` and `@` in a secret). Without it,
//!   `options.endpoint_url`, then `$AWS_ENDPOINT_URL_S3`, then `$AWS_ENDPOINT_URL`; with
//!   none of them the adapter talks to AWS itself (`https://s3.<region>.amazonaws.com`).
//! - Credentials, first found: admin_url's userinfo; `options.access_key_id` /
//!   `options.secret_access_key` (or binky 0.1.2's `access_key` / `secret_key`);
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
//! # Which home made a slice
//! The bucket's tag `binky-home` (bucket mode; other tags are kept), or the metadata
//! `binky-home` of the slice's marker object `<slice>/` in a shared bucket (see
//! [`crate::adapters::Maker`]; a provision keeps an existing marker). The last write wins
//! when two homes claim one slice at once. Teardown removes the bucket's tags before the
//! bucket (moto keeps a deleted bucket's tags for the next bucket of its name).
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
//!   objects.
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
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, ObjectIdentifier, Tag, Tagging,
};
use aws_sdk_s3::Client;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use sha2::{Digest, Sha256};

use super::http::Endpoint;
use super::{redact, Adapter, AdapterConfig, AdapterError, Address, Maker, Result, Slice};

mod server;
mod settings;
use server::*;
use settings::*;

/// The bucket tag (bucket mode) or the marker object's metadata (prefix mode) naming the
/// binky home that made the slice.
const HOME_TAG: &str = "binky-home";
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

/// A bucket name given by the user (`options.bucket`), checked against S3's rules.
fn check_bucket(name: &str) -> Result<()> {
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

#[async_trait::async_trait]
impl Adapter for S3 {
    fn kind(&self) -> Option<super::AdapterKind> {
        Some(super::AdapterKind::S3)
    }

    async fn provision(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
        check_name(slice)?;
        let server = Server::new(cfg)?;
        let place = server.settings.place(slice);
        server.ensure_bucket(place.bucket()).await?;
        if let Place::Prefix { bucket, prefix } = &place {
            // Lets `list` find the slice while it holds nothing else. One that is there is
            // kept: it carries the mark of the home that made the slice.
            if server.object_home(bucket, prefix).await?.is_none() {
                server.put_marker(bucket, prefix).await?;
            }
        }
        for b in &cfg.buckets {
            let b = b.trim_matches('/');
            if !b.is_empty() {
                let key = format!("{}{b}/", place.prefix());
                server.put_marker(place.bucket(), &key).await?;
            }
        }
        Ok(())
    }

    async fn resolve(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Address> {
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
    }

    async fn teardown(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<()> {
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
                    // The home's mark goes with the bucket; some servers (moto) would
                    // keep a deleted bucket's tags for the next bucket of its name.
                    server.untag_bucket(&bucket).await?;
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
    }

    async fn list(&self, cfg: &AdapterConfig) -> Result<Vec<String>> {
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
                        return server
                            .fail(&format!("ListObjectsV2 {bucket}"), e)
                            .no_bucket_means(names)
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
    }

    async fn maker(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Maker> {
        check_name(slice)?;
        let server = Server::new(cfg)?;
        let marked = match server.settings.place(slice) {
            Place::Bucket(bucket) => server.bucket_home(&bucket).await?,
            Place::Prefix { bucket, prefix } => match server.object_home(&bucket, &prefix).await? {
                None if server.holds_any(&bucket, &prefix).await? => Some(None),
                found => found,
            },
        };
        Ok(match marked {
            None => Maker::Absent,
            Some(None) => Maker::Unmarked,
            Some(Some(home)) => Maker::Home(home),
        })
    }

    async fn claim(&self, slice: &Slice, cfg: &AdapterConfig, home: &str) -> Result<Maker> {
        check_name(slice)?;
        super::check_home(home)?;
        let found = self.maker(slice, cfg).await?;
        if found.other_than(home).is_some() || found == Maker::Home(home.to_owned()) {
            return Ok(found);
        }
        // S3 has no compare-and-set here: of two homes claiming one slice at once (each
        // adopting one made before homes had an identity), the last write wins, and the
        // loser finds it when it reads the mark back.
        let server = Server::new(cfg)?;
        match server.settings.place(slice) {
            Place::Bucket(bucket) => server.tag_bucket_home(&bucket, home).await?,
            Place::Prefix { bucket, prefix } => {
                server.put_home_marker(&bucket, &prefix, home).await?
            }
        }
        self.maker(slice, cfg).await
    }

    async fn exists(&self, slice: &Slice, cfg: &AdapterConfig) -> Result<Option<bool>> {
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
    }
}

#[cfg(test)]
mod tests;
