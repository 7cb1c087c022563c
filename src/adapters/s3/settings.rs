//! Where the endpoint, region and keys come from: admin_url, options, the AWS environment.

use super::*;

/// Everything the adapter needs to talk to the server, from the configuration.
pub(super) struct Settings {
    /// The endpoint without credentials (`http://127.0.0.1:9000`); `None`: AWS.
    pub(super) endpoint: Option<String>,
    pub(super) region: String,
    pub(super) access_key_id: String,
    pub(super) secret_access_key: String,
    pub(super) session_token: Option<String>,
    /// `options.bucket`.
    pub(super) shared_bucket: Option<String>,
}

/// Reads the environment (a function so unit tests can pass their own).
pub(super) type EnvFn<'a> = &'a dyn Fn(&str) -> Option<String>;

pub(super) fn real_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Settings {
    pub(super) fn from_config(cfg: &AdapterConfig, env: EnvFn<'_>) -> Result<Settings> {
        let opt = |k: &str| cfg.option(k).map(str::to_owned);
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
                    crate::adapters::without_credentials(e)
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
    pub(super) fn place(&self, slice: &Slice) -> Place {
        match &self.shared_bucket {
            Some(b) => Place::Prefix {
                bucket: b.clone(),
                prefix: prefix_of(slice),
            },
            None => Place::Bucket(bucket_name(&slice.name)),
        }
    }

    /// The endpoint shown in messages and handed to worlds.
    pub(super) fn shown(&self) -> String {
        match &self.endpoint {
            Some(e) => e.clone(),
            None => format!("https://s3.{}.amazonaws.com", self.region),
        }
    }

    pub(super) fn client(&self) -> Client {
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
