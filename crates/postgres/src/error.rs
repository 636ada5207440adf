//! Driver and pool errors onto [`delayq_core::Error`]: a connection that cannot be made or
//! is lost is [`Error::Unavailable`] (retry), a full disk [`Error::Full`], a refused login
//! or privilege, an unknown database or a failed TLS handshake [`Error::InvalidConfig`] (waiting cannot
//! fix them: the URL or the server's settings must change), anything else
//! [`Error::Internal`] naming what was being done.

use delayq_core::Error;
use tokio_postgres::error::SqlState;

/// A driver error while doing `what`.
pub(crate) fn db_err(what: &str, e: tokio_postgres::Error) -> Error {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::DISK_FULL
            || *code == SqlState::OUT_OF_MEMORY
            || *code == SqlState::PROGRAM_LIMIT_EXCEEDED
        {
            return Error::full(format!("{what}: PostgreSQL refused the write"), e);
        }
        if code.code().starts_with("28") {
            return Error::InvalidConfig {
                reason: format!(
                    "{what}: PostgreSQL refused the login ({}: {}); check the user and password in the URL, and that the server's pg_hba.conf lets this host in (a server that accepts only TLS needs sslmode=require)",
                    code.code(),
                    db.message()
                ),
            };
        }
        if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            return Error::InvalidConfig {
                reason: format!(
                    "{what}: PostgreSQL refused a privilege ({}); the engine makes and upgrades its schema delayq when it starts: grant the user CREATE on the database, or start it once as the database's owner",
                    db.message()
                ),
            };
        }
        if *code == SqlState::INVALID_CATALOG_NAME {
            return Error::InvalidConfig {
                reason: format!(
                    "{what}: {}; create it (createdb) or name another database in the URL",
                    db.message()
                ),
            };
        }
        if retryable(code) {
            return Error::unavailable(format!("{what}: PostgreSQL answered {}", code.code()), e);
        }
        return Error::Internal(format!(
            "{what}: PostgreSQL answered {} ({})",
            code.code(),
            db.message()
        ));
    }
    if let Some(tls) = tls_failure(&e) {
        return Error::InvalidConfig {
            reason: format!("{what}: {tls}"),
        };
    }
    // The innermost cause says why (refused, timed out, reset), without the OS's number.
    let mut cause: &(dyn std::error::Error + 'static) = &e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let why = cause.to_string();
    let why = why
        .split(" (os error")
        .next()
        .unwrap_or_default()
        .to_string();
    Error::unavailable(
        format!("{what}: the PostgreSQL connection failed ({why})"),
        e,
    )
}

/// What went wrong in the TLS handshake and what to change, if that is where `e` came
/// from: rustls refused the server's certificate, or the server does not speak TLS while
/// the URL requires it.
fn tls_failure(e: &tokio_postgres::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        let found = s.downcast_ref::<rustls::Error>().or_else(|| {
            s.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|i| i.downcast_ref::<rustls::Error>())
        });
        if let Some(r) = found {
            let todo = match r {
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                ) => {
                    "connect by a host name the certificate holds, or check only who signed it with sslmode=verify-ca"
                }
                rustls::Error::InvalidCertificate(_) => {
                    "trust the authority that signed the server's certificate with sslrootcert=/path/to/ca.pem in the URL"
                }
                _ => "check the server's TLS settings (ssl_cert_file, ssl_min_protocol_version)",
            };
            return Some(format!("the TLS handshake failed ({r}); {todo}"));
        }
        source = s.source();
    }
    // The driver says so in words only.
    e.to_string().contains("server does not support TLS").then(|| {
        "the server does not offer TLS but the URL requires it; turn on ssl in postgresql.conf, or lower sslmode".to_string()
    })
}

/// Codes after which the same call may succeed: the server is shutting down or starting,
/// the connection or the transaction was cut, or a lock or serialisation conflict.
fn retryable(code: &SqlState) -> bool {
    let c = code.code();
    c.starts_with("08") // connection exceptions
        || c.starts_with("57P") // operator intervention: shutdown, crash, cannot connect now
        || c.starts_with("53") // insufficient resources (too many connections ...)
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::LOCK_NOT_AVAILABLE
        || *code == SqlState::QUERY_CANCELED
}

/// A pool error while doing `what`: no connection could be had.
pub(crate) fn pool_err(what: &str, e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(e) => db_err(what, e),
        other => Error::unavailable(
            format!("{what}: no PostgreSQL connection could be had from the pool"),
            other,
        ),
    }
}
