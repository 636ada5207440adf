//! How a test server is secured and how the harness gets in: the TLS files generated for
//! it ([`crate::tls::TlsFiles`]), the application's ACL user ([`AclUser`], [`ACL_RULES`]), and
//! [`Access`], the harness's own way in (TLS with the generated CA, the default user's
//! password) for its readiness checks, `redis-cli` and the connections it hands to tests.

use std::time::Duration;

use redis::{Client, RedisResult, TlsCertificates};

use crate::tls::TlsFiles;

/// The password of the default user of a server with an [`AclUser`]: the harness's own
/// connections, `redis-cli` and replicas (`masterauth`) use it; the application does not.
pub(crate) const ADMIN_PASSWORD: &str = "delayq-testkit-admin";

/// What the [`AclUser`] of a test server may do: the commands delayq sends (and those its
/// functions call) on the keys of the default prefix, `delayq:*`, and nothing else. Data
/// commands (`@read`, `@write`, which take in `BZPOPMIN`), `FCALL` and `FUNCTION LOAD`
/// (`@scripting`), the connection commands (`AUTH`, `PING`, `WAIT`, `CLIENT ID` and
/// `UNBLOCK` for the waker), `INFO` (the version check), `TIME`, `CLUSTER SLOTS` (a
/// cluster client learns the topology with it), `CLUSTER INFO` (readiness on a cluster:
/// is it up) and `CLUSTER SHARDS` (which slots share a primary, skipped together when it
/// does not answer). `CONFIG` is left out: delayq only reads the eviction policy, and says
/// so in its log when it may not.
pub const ACL_RULES: &str = "resetkeys ~delayq:* resetchannels -@all +@read +@write +@scripting +@connection +info +time +cluster|slots +cluster|info +cluster|shards";

/// An ACL user for the application ([`crate::RedisOptions::acl`]): it logs in with this name
/// and password and holds [`ACL_RULES`]; the default user then needs a password that only
/// the harness knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclUser {
    /// The user name.
    pub name: String,
    /// Its password.
    pub password: String,
}

impl AclUser {
    /// A user `name` with `password`.
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Self {
        AclUser {
            name: name.into(),
            password: password.into(),
        }
    }

    /// `name:password`, for the user-info part of a URL.
    pub fn userinfo(&self) -> String {
        format!("{}:{}", self.name, self.password)
    }

    /// The `redis-server` arguments that protect the default user with [`ADMIN_PASSWORD`]
    /// (replicas log in to their primary with it) and create this user.
    pub(crate) fn server_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--requirepass",
            ADMIN_PASSWORD,
            "--masterauth",
            ADMIN_PASSWORD,
            "--user",
            &self.name,
            "on",
            &format!(">{}", self.password),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(ACL_RULES.split_whitespace().map(str::to_string));
        args
    }
}

/// How the harness reaches a server on 127.0.0.1: over TLS trusting the generated CA (a
/// server with no plain port), and as the default user with [`ADMIN_PASSWORD`] (a server
/// with an [`AclUser`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Access {
    /// The CA certificate (PEM) to trust, when the harness must speak TLS.
    ca: Option<Vec<u8>>,
    /// The default user's password, when it has one.
    password: Option<&'static str>,
}

impl Access {
    /// TLS trusting `tls`'s CA when given; the admin password when `acl`.
    pub(crate) fn new(tls: Option<&TlsFiles>, acl: bool) -> Self {
        Access {
            ca: tls.map(|t| t.ca.clone().into_bytes()),
            password: acl.then_some(ADMIN_PASSWORD),
        }
    }

    /// True when the harness speaks TLS to the server.
    pub(crate) fn tls(&self) -> bool {
        self.ca.is_some()
    }

    /// The default user's password, if it has one.
    pub(crate) fn password(&self) -> Option<&'static str> {
        self.password
    }

    /// `redis://` or `rediss://` with the admin password, for the node on `port`.
    pub(crate) fn url(&self, port: u16) -> String {
        let scheme = if self.tls() { "rediss" } else { "redis" };
        let auth = self.password.map(|p| format!(":{p}@")).unwrap_or_default();
        format!("{scheme}://{auth}127.0.0.1:{port}")
    }

    /// The TLS settings for a redis-rs client, when TLS. Installs the ring crypto provider,
    /// as the engine does: redis-rs leaves that choice to the application.
    pub(crate) fn certs(&self) -> Option<TlsCertificates> {
        let ca = self.ca.as_ref()?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        Some(TlsCertificates {
            client_tls: None,
            root_cert: Some(ca.clone()),
        })
    }

    /// A client for the node on `port`.
    pub(crate) fn client(&self, port: u16) -> RedisResult<Client> {
        match self.certs() {
            None => Client::open(self.url(port)),
            Some(certs) => Client::build_with_tls(self.url(port), certs),
        }
    }

    /// True when the server on `port` answers PING with PONG (and is not loading its data).
    pub(crate) fn ping(&self, port: u16) -> bool {
        let Ok(client) = self.client(port) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
            return false;
        };
        if conn
            .set_read_timeout(Some(Duration::from_millis(500)))
            .is_err()
        {
            return false;
        }
        redis::cmd("PING")
            .query::<String>(&mut conn)
            .is_ok_and(|pong| pong == "PONG")
    }
}
