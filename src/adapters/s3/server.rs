//! The S3 client and the bucket and object calls binky makes with it.

use super::*;

use crate::adapters::error_chain;

/// One adapter call's connection to the server.
pub(super) struct Server {
    pub(super) settings: Settings,
    pub(super) client: Client,
    pub(super) shown: String,
}

/// What an S3 error was.
#[derive(Debug)]
pub(super) struct Failure {
    /// The HTTP status, when there was an answer.
    pub(super) status: Option<u16>,
    /// The S3 error code (`NoSuchBucket`), when the answer had one.
    pub(super) code: Option<String>,
    /// The adapter error it amounts to.
    pub(super) error: AdapterError,
}

impl Failure {
    /// `gone` when the bucket does not exist (there is nothing of it left to list or
    /// delete), else the failure's error.
    pub(super) fn no_bucket_means<T>(self, gone: T) -> Result<T> {
        if self.code.as_deref() == Some("NoSuchBucket") {
            Ok(gone)
        } else {
            Err(self.error)
        }
    }
}

impl Server {
    pub(super) fn new(cfg: &AdapterConfig) -> Result<Server> {
        let settings = Settings::from_config(cfg, &real_env)?;
        let client = settings.client();
        let shown = settings.shown();
        Ok(Server {
            settings,
            client,
            shown,
        })
    }

    pub(super) fn scrub(&self, text: &str) -> String {
        crate::adapters::scrub(
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
    pub(super) fn fail<E>(
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
                     s3:DeleteObjectVersion, s3:GetBucketTagging, s3:PutBucketTagging and \
                     s3:ListAllMyBuckets on binky's buckets"
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
    pub(super) async fn bucket_exists(&self, bucket: &str) -> Result<bool> {
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

    pub(super) fn taken(&self, bucket: &str) -> AdapterError {
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
    pub(super) async fn ensure_bucket(&self, bucket: &str) -> Result<()> {
        if self.bucket_exists(bucket).await? {
            return Ok(());
        }
        let mut req = self.client.create_bucket().bucket(bucket);
        // AWS wants the region named, except for us-east-1, which refuses it. Other
        // servers take the region of the signature.
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

    /// The home the tag [`HOME_TAG`] of `bucket` names: `None` when there is no bucket,
    /// `Some(None)` for a bucket without it.
    pub(super) async fn bucket_home(&self, bucket: &str) -> Result<Option<Option<String>>> {
        Ok(self.bucket_tags(bucket).await?.map(|tags| {
            tags.into_iter()
                .find(|t| t.key() == HOME_TAG)
                .map(|t| t.value().to_owned())
        }))
    }

    /// `bucket`'s tags (`None`: no bucket).
    async fn bucket_tags(&self, bucket: &str) -> Result<Option<Vec<Tag>>> {
        match self.client.get_bucket_tagging().bucket(bucket).send().await {
            Ok(out) => Ok(Some(out.tag_set().to_vec())),
            Err(e) => {
                let f = self.fail(&format!("GetBucketTagging {bucket}"), e);
                match f.code.as_deref() {
                    Some("NoSuchTagSet") => Ok(Some(Vec::new())),
                    Some("NoSuchBucket") => Ok(None),
                    _ => Err(f.error),
                }
            }
        }
    }

    /// Tags `bucket` as `home`'s, keeping its other tags.
    pub(super) async fn tag_bucket_home(&self, bucket: &str, home: &str) -> Result<()> {
        let doing = format!("PutBucketTagging {bucket}");
        let mut tags: Vec<Tag> = self
            .bucket_tags(bucket)
            .await?
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key() != HOME_TAG)
            .collect();
        tags.push(
            Tag::builder()
                .key(HOME_TAG)
                .value(home)
                .build()
                .map_err(|e| AdapterError::Config(format!("{doing}: {e}")))?,
        );
        let tagging = Tagging::builder()
            .set_tag_set(Some(tags))
            .build()
            .map_err(|e| AdapterError::Config(format!("{doing}: {e}")))?;
        self.client
            .put_bucket_tagging()
            .bucket(bucket)
            .tagging(tagging)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.fail(&doing, e).error)
    }

    /// Removes `bucket`'s tags (a bucket already gone: nothing to remove).
    pub(super) async fn untag_bucket(&self, bucket: &str) -> Result<()> {
        match self
            .client
            .delete_bucket_tagging()
            .bucket(bucket)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => self
                .fail(&format!("DeleteBucketTagging {bucket}"), e)
                .no_bucket_means(()),
        }
    }

    /// The home the metadata [`HOME_TAG`] of the object `key` names: `None` when there is
    /// no such object (or bucket), `Some(None)` for one without it.
    pub(super) async fn object_home(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<Option<String>>> {
        match self
            .client
            .head_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.metadata().and_then(|m| m.get(HOME_TAG)).cloned())),
            Err(e) => {
                let f = self.fail(&format!("HeadObject {bucket}/{key}"), e);
                match f.status {
                    Some(404) => Ok(None),
                    _ => Err(f.error),
                }
            }
        }
    }

    /// Is there any object under `prefix` in `bucket`?
    pub(super) async fn holds_any(&self, bucket: &str, prefix: &str) -> Result<bool> {
        match self
            .client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .max_keys(1)
            .send()
            .await
        {
            Ok(out) => Ok(out.key_count().unwrap_or(0) > 0 || !out.contents().is_empty()),
            Err(e) => self
                .fail(&format!("ListObjectsV2 {bucket}"), e)
                .no_bucket_means(false),
        }
    }

    /// An empty marker object carrying `home` as its metadata [`HOME_TAG`].
    pub(super) async fn put_home_marker(&self, bucket: &str, key: &str, home: &str) -> Result<()> {
        self.client
            .put_object()
            .bucket(bucket)
            .key(key)
            .metadata(HOME_TAG, home)
            .body(ByteStream::from_static(b""))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.fail(&format!("PutObject {bucket}/{key}"), e).error)
    }

    /// An empty marker object.
    pub(super) async fn put_marker(&self, bucket: &str, key: &str) -> Result<()> {
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
    pub(super) async fn sweep(&self, bucket: &str, prefix: &str) -> Result<bool> {
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
                    Err(f) => return f.no_bucket_means(false),
                }
            } else {
                match self.first_objects(bucket, prefix).await {
                    Ok(b) => b,
                    Err(f) => return f.no_bucket_means(false),
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
                    return self
                        .fail(&format!("DeleteObjects {bucket} ({n} keys)"), e)
                        .no_bucket_means(false)
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
    pub(super) async fn first_versions(
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
    pub(super) async fn first_objects(
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
    pub(super) async fn abort_uploads(&self, bucket: &str, prefix: &str) -> Result<bool> {
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
    pub(super) async fn delete_bucket(&self, bucket: &str) -> Result<bool> {
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
