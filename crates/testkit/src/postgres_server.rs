//! [`PostgresServer`]: a real PostgreSQL cluster owned by a test (issue 21), made with
//! `initdb` in a temporary directory and run by `postgres` itself on a free loopback port,
//! killed when dropped.
//!
//! PostgreSQL refuses to run as root, and CI runs as root here: then the directory is
//! handed to the `postgres` system user and both programs run as it, through `runuser`. The
//! machine's own server (port 5432) is never touched. Debian's binaries are found under
//! `/usr/lib/postgresql/<newest>/bin` unless `DELAYQ_POSTGRES_BIN` names the directory; a
//! missing one fails with what to install, it never skips.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// The environment variable naming the directory of `initdb` and `postgres`.
pub const POSTGRES_BIN_ENV: &str = "DELAYQ_POSTGRES_BIN";

/// The system user that runs the server when the test runs as root.
const SYSTEM_USER: &str = "postgres";

/// The superuser's password on a server made by [`PostgresServer::start_secure`].
pub const POSTGRES_PASSWORD: &str = "delayq-testkit-secret";

/// A running PostgreSQL owned by the test; superuser `postgres`, database `postgres`; trust
/// authentication on loopback, or (made by [`PostgresServer::start_secure`]) TLS and a
/// password only.
pub struct PostgresServer {
    /// The postmaster (under `runuser` when root), in a process group of its own.
    child: Option<Child>,
    port: u16,
    bin: PathBuf,
    /// Holds `data/` (the cluster), `sock/` and `postgres.log`; `ca.pem`, `server.pem`,
    /// `server.key` and `password` when secure.
    dir: TempDir,
    /// TLS only and `scram-sha-256` passwords.
    secure: bool,
}

impl PostgresServer {
    /// Makes a cluster and starts it on a free port. Panics with its log if it does not come
    /// up.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// As [`PostgresServer::start`], but TCP clients must speak TLS (a certificate for
    /// `localhost` only, signed by [`PostgresServer::ca_file`]) and log in with a password
    /// ([`POSTGRES_PASSWORD`], checked by `scram-sha-256`); a plain connection is rejected.
    pub fn start_secure() -> Self {
        Self::start_with(true)
    }

    fn start_with(secure: bool) -> Self {
        let bin = postgres_bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("delayq-postgres-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for PostgreSQL: {e}"));
        std::fs::create_dir(dir.path().join("sock"))
            .unwrap_or_else(|e| panic!("cannot create the socket directory: {e}"));
        if secure {
            // Written before the directory is handed over, so the server user owns them; the
            // key must be readable by its owner only or the server refuses it.
            let tls = crate::tls::TlsFiles::generate_for(&["localhost"]);
            tls.write(dir.path());
            std::fs::set_permissions(
                dir.path().join("server.key"),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )
            .unwrap_or_else(|e| panic!("cannot restrict server.key: {e}"));
            std::fs::write(dir.path().join("password"), POSTGRES_PASSWORD)
                .unwrap_or_else(|e| panic!("cannot write the password file: {e}"));
        }
        if running_as_root() {
            // The whole directory, so the server can write its log, data and socket.
            let status = Command::new("chown")
                .args(["-R", &format!("{SYSTEM_USER}:")])
                .arg(dir.path())
                .status()
                .unwrap_or_else(|e| panic!("cannot run chown: {e}"));
            assert!(
                status.success(),
                "cannot give {} to the {SYSTEM_USER} user (the Debian package postgresql makes it): {status}",
                dir.path().display()
            );
        }
        let mut initdb = as_server_user(&bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(dir.path().join("data"))
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if secure {
            initdb
                .args(["--auth-host=scram-sha-256", "--pwfile"])
                .arg(dir.path().join("password"));
        }
        let out = crate::child::spawn(&mut initdb, "postgresql", POSTGRES_BIN_ENV)
            .wait_with_output()
            .unwrap_or_else(|e| panic!("initdb: {e}"));
        assert!(
            out.status.success(),
            "initdb failed: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if secure {
            // TLS and a password over TCP, nothing else; the socket stays open to the owner.
            std::fs::write(
                dir.path().join("data/pg_hba.conf"),
                "local all all trust\n\
                 hostssl all all 127.0.0.1/32 scram-sha-256\n\
                 hostnossl all all 127.0.0.1/32 reject\n",
            )
            .unwrap_or_else(|e| panic!("cannot write pg_hba.conf: {e}"));
        }
        let mut server = PostgresServer {
            child: None,
            port: 0,
            bin,
            dir,
            secure,
        };
        // The last attempt's port is the one it listens on.
        crate::child::on_a_free_port("postgres", |port| {
            server.port = port;
            server.spawn_and_wait()
        });
        server
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`; on a secure server
    /// `postgres://postgres:<password>@localhost:<port>/postgres?sslmode=verify-full&sslrootcert=<ca>`.
    pub fn url(&self) -> String {
        if self.secure {
            format!(
                "postgres://postgres:{POSTGRES_PASSWORD}@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
                self.port,
                self.ca_file().display()
            )
        } else {
            format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
        }
    }

    /// The certificate authority (PEM) of a secure server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The directory of its Unix socket, where the harness's own connections need neither
    /// TLS nor a password (`host=<dir> port=<port>`).
    pub fn sock_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The port it listens on, at 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Kills the postmaster and its backends with SIGKILL, as a crash does; the cluster
    /// stays for [`PostgresServer::restart`], which recovers it from its WAL.
    pub fn kill(&mut self) {
        crate::child::kill_group(&mut self.child);
        self.remove_stale_pid_file();
    }

    /// A killed postmaster leaves its pid file, and the next start refuses to run while
    /// that process exists. Under `runuser` the postmaster is not this process's child: it
    /// stays a zombie until something else reaps it, which took seconds. Once it is dead
    /// (gone or a zombie) the file is stale and goes, as an operator would remove it.
    fn remove_stale_pid_file(&self) {
        let file = self.dir.path().join("data/postmaster.pid");
        let Some(pid) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| t.lines().next()?.trim().parse::<u32>().ok())
        else {
            return;
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            // The state is the field after the command's closing parenthesis.
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next());
            if matches!(state, None | Some('Z' | 'X')) {
                let _ = std::fs::remove_file(&file);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Copies the cluster's data directory to `to` (which must not exist yet), owner and
    /// modes kept: an operator's file-level backup. Call it while the server is killed
    /// ([`PostgresServer::kill`]); it is then what a crash left, and a start recovers it.
    pub fn copy_data(&self, to: &Path) {
        copy_tree(&self.dir.path().join("data"), to);
    }

    /// Puts back a copy taken by [`PostgresServer::copy_data`] in place of the cluster's data
    /// directory, while the server is killed: a restore of an older backup, or a standby that
    /// was promoted without the last commits. [`PostgresServer::restart`] starts it.
    pub fn restore_data(&mut self, from: &Path) {
        let data = self.dir.path().join("data");
        std::fs::remove_dir_all(&data)
            .unwrap_or_else(|e| panic!("cannot remove {}: {e}", data.display()));
        copy_tree(from, &data);
    }

    /// Starts it again on the same port and cluster after [`PostgresServer::kill`].
    pub fn restart(&mut self) {
        let port = self.port;
        crate::child::again("postgres", port, 40, Duration::from_millis(250), || {
            self.spawn_and_wait()
        });
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let ready = "database system is ready to accept connections";
        let before = self.log().matches(ready).count();
        let mut cmd = as_server_user(&self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(self.dir.path().join("sock"))
            // Durable as a real server (fsync on): the crash tests rely on it.
            .args(["-c", "logging_collector=off", "-c", "max_connections=200"])
            // After a crash the startup flushes the data directory before recovery: one
            // syncfs of the file system instead of an fsync per file (seconds here).
            .args(["-c", "recovery_init_sync_method=syncfs"])
            .args(if self.secure {
                vec![
                    "-c".to_string(),
                    "ssl=on".to_string(),
                    "-c".to_string(),
                    format!(
                        "ssl_cert_file={}",
                        self.dir.path().join("server.pem").display()
                    ),
                    "-c".to_string(),
                    format!(
                        "ssl_key_file={}",
                        self.dir.path().join("server.key").display()
                    ),
                ]
            } else {
                Vec::new()
            })
            .current_dir(self.dir.path())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Opened here and inherited: the server user need not be able to open it.
            .stderr(Stdio::from(self.open_log()));
        self.child = Some(crate::child::spawn(
            &mut cmd,
            "postgresql",
            POSTGRES_BIN_ENV,
        ));
        let addr = self.addr();
        let log = self.log_path();
        if crate::child::wait_until_up_within(&mut self.child, Duration::from_secs(30), || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.matches(ready).count() > before)
                && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        }) {
            return Ok(());
        }
        self.kill();
        Err(self.log())
    }

    fn open_log(&self) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.log_path().display()))
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            eprintln!("--- postgres log (port {}) ---\n{}", self.port, self.log());
        }
        self.kill();
    }
}

/// `cp -a from to`: owner, modes and times kept, as the server requires of its data.
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("cannot run cp: {e}"));
    assert!(
        status.success(),
        "cannot copy {} to {}: {status}",
        from.display(),
        to.display()
    );
}

/// Whether this process runs as root (the owner of `/proc/self` is its effective user).
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `program`, run as the `postgres` user when this process is root.
fn as_server_user(program: &Path) -> Command {
    if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", SYSTEM_USER, "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// The directory of `initdb` and `postgres` a [`PostgresServer`] runs: `DELAYQ_POSTGRES_BIN`,
/// else the newest `/usr/lib/postgresql/<version>/bin`, else the `PATH`'s (an empty path:
/// starting then says what to install).
pub fn postgres_bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(POSTGRES_BIN_ENV) {
        return PathBuf::from(d);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max();
    newest.map(|(_, bin)| bin).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster comes up on its own port, answers, and is back after a SIGKILL with what
    /// it committed.
    fn psql(pg: &PostgresServer, sql: &str) -> String {
        let out = Command::new(pg.bin.join("psql"))
            .args(["-X", "-A", "-t", "-d", &pg.url(), "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("psql: {e}"));
        assert!(
            out.status.success(),
            "{sql}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            pg.log()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A cluster comes up on its own port, answers, and is back after a SIGKILL with what
    /// it committed.
    #[test]
    fn a_cluster_of_its_own_survives_a_kill() {
        let mut pg = PostgresServer::start();
        assert_ne!(pg.port, 5432);
        psql(&pg, "create table t (v int); insert into t values (7)");
        pg.kill();
        pg.restart();
        assert_eq!(psql(&pg, "select v from t"), "7");
    }

    /// A secure server lets in TLS with the password, and nothing else.
    #[test]
    fn a_secure_cluster_wants_tls_and_the_password() {
        let pg = PostgresServer::start_secure();
        assert_eq!(
            psql(
                &pg,
                "select ssl from pg_stat_ssl where pid = pg_backend_pid()"
            ),
            "t"
        );
        let port = pg.port;
        for refused in [
            format!("postgres://postgres@localhost:{port}/postgres?sslmode=require"),
            format!(
                "postgres://postgres:{POSTGRES_PASSWORD}@localhost:{port}/postgres?sslmode=disable"
            ),
        ] {
            let out = Command::new(pg.bin.join("psql"))
                .args(["-X", "-A", "-t", "-w", "-d", &refused, "-c", "select 1"])
                .output()
                .unwrap_or_else(|e| panic!("psql: {e}"));
            assert!(!out.status.success(), "{refused} was let in");
        }
    }
}
