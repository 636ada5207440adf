//! HTTPS: `serve --tls-cert/--tls-key` end to end with SIGHUP reloading the certificate,
//! and the client's `--ca-cert` trusting a self-signed certificate (rcgen's and
//! `openssl req -x509`'s), each TLS failure exit 1 saying why.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{BIN, Server, fails, http_listener, json_of, ok};

/// Writes a new self-signed certificate for 127.0.0.1 and its key; returns the
/// certificate's PEM.
fn write_self_signed(cert: &Path, key: &Path) -> String {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let pem = certified.cert.pem();
    std::fs::write(cert, &pem).unwrap();
    std::fs::write(key, certified.signing_key.serialize_pem()).unwrap();
    pem
}

/// An HTTPS client that trusts only `ca_pem`, with no connection kept between requests.
fn https_client(ca_pem: &str) -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// With --tls-cert and --tls-key the server speaks HTTPS (auth on, the token never in
/// clear); SIGHUP makes it present the certificate now in the files.
#[test]
fn https_end_to_end_and_sighup_reload_issue_12() {
    // See: issue 12
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    let first = write_self_signed(&cert, &key);
    let token = "a-token-of-sixteen-chars-or-more";
    let s = Server::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--token",
        token,
    ]);
    let base = s.url.replace("http://", "https://");
    s.wait_for_log("serving on https://");
    let client = https_client(&first);
    let pushed = client
        .post(format!("{base}/v1/topics/tls/jobs"))
        .bearer_auth(token)
        .json(&serde_json::json!({"id": "j1", "body": "over TLS"}))
        .send()
        .unwrap();
    assert_eq!(pushed.status().as_u16(), 201);
    let job: serde_json::Value = client
        .get(format!("{base}/v1/topics/tls/jobs/j1"))
        .bearer_auth(token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(job["body"], "over TLS");
    let anonymous = client.get(format!("{base}/v1/topics")).send().unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    // The CLI talks HTTPS too, trusting the self-signed certificate with --ca-cert; without
    // it, the certificate is refused, saying why (a TLS failure: exit 1, not "unreachable");
    // a file that is not a certificate is a usage error.
    let cli = |extra: &[&str]| {
        Command::new(BIN)
            .args(["get", "tls", "j1", "--server", &base, "--token", token])
            .args(extra)
            .env_remove("DELAYQ_CA_CERT")
            .output()
            .unwrap()
    };
    let out = ok(cli(&["--ca-cert", cert.to_str().unwrap()]));
    assert!(out.contains("body: over TLS"), "{out}");
    let (code, err) = fails(cli(&[]));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("TLS with https://") && err.contains("--ca-cert"),
        "{err}"
    );
    let (code, err) = fails(cli(&["--ca-cert", key.to_str().unwrap()]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--ca-cert"), "{err}");
    // Plain HTTP gets no API.
    let plain = reqwest::blocking::get(format!("{}/healthz", s.url));
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    let second = write_self_signed(&cert, &key);
    let hup = Command::new("kill")
        .args(["-HUP", &s.serving.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    s.wait_for_log("reloaded the TLS certificate");
    let trusts_second = https_client(&second);
    let ok_now = trusts_second.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(ok_now.status().as_u16(), 200);
    assert!(
        https_client(&first)
            .get(format!("{base}/healthz"))
            .send()
            .is_err(),
        "the old certificate is still presented"
    );
    // A file that is not a certificate is refused and the current one stays.
    std::fs::write(&cert, "not a certificate").unwrap();
    Command::new("kill")
        .args(["-HUP", &s.serving.child.id().to_string()])
        .status()
        .unwrap();
    s.wait_for_log("the previous certificate stays in use");
    let still = trusts_second.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(still.status().as_u16(), 200);
}

/// `openssl req -x509` as people type it to make a server certificate: self-signed for
/// 127.0.0.1, and so marked as an authority (CA:TRUE, openssl's default), which webpki
/// refuses as a server's own certificate. Writes `<name>.pem` and `<name>.key` into `dir`.
fn openssl_self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (scripts/test.sh installs it)");
    assert!(made.status.success(), "openssl: {made:?}");
    let ext = ok(Command::new("openssl")
        .args(["x509", "-noout", "-ext", "basicConstraints", "-in"])
        .arg(&cert)
        .output()
        .unwrap());
    assert!(
        ext.contains("CA:TRUE"),
        "the certificate is an authority: {ext}"
    );
    (cert, key)
}

/// `--ca-cert` takes the certificate `openssl req -x509` makes (CA:TRUE), as curl and the
/// Python and Node clients do: push, get and health over HTTPS. Without it, with another
/// certificate, for a host the certificate does not name, or against a server that does not
/// speak TLS, the command fails with exit 1 naming the TLS problem, never "is `delayq
/// serve` running?" (exit 5).
// See: issue 36
#[test]
fn ca_cert_trusts_an_openssl_self_signed_certificate_issue_36() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = openssl_self_signed(certs.path(), "server");
    let (other, _) = openssl_self_signed(certs.path(), "other");
    let s = Server::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    s.wait_for_log("serving on https://");
    let base = s.url.replace("http://", "https://");
    let cli = |args: &[&str], server: &str, ca: Option<&Path>| {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .args(["--server", server])
            .env_remove("DELAYQ_CA_CERT")
            .env_remove("DELAYQ_TOKEN");
        if let Some(ca) = ca {
            cmd.arg("--ca-cert").arg(ca);
        }
        cmd.output().unwrap()
    };
    let out = ok(cli(
        &["push", "tls", "over TLS", "--id", "j1"],
        &base,
        Some(&cert),
    ));
    assert!(out.starts_with("pushed j1 in tls"), "{out}");
    let out = ok(cli(&["get", "tls", "j1"], &base, Some(&cert)));
    assert!(out.contains("body: over TLS"), "{out}");
    let out = ok(cli(&["health"], &base, Some(&cert)));
    assert!(out.starts_with("ready"), "{out}");

    let refused = |args: &[&str], server: &str, ca: Option<&Path>, why: &str| {
        let (code, err) = fails(cli(args, server, ca));
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("TLS with https://") && err.contains(why),
            "{err}"
        );
        assert!(!err.contains("is `delayq serve` running"), "{err}");
        err
    };
    let err = refused(
        &["get", "tls", "j1"],
        &base,
        None,
        "this client does not trust",
    );
    assert!(err.contains("--ca-cert"), "{err}");
    refused(
        &["get", "tls", "j1"],
        &base,
        Some(&other),
        "this client does not trust",
    );
    // The exact certificate, but for another host than the one it names.
    let localhost = base.replace("127.0.0.1", "localhost");
    refused(
        &["get", "tls", "j1"],
        &localhost,
        Some(&cert),
        "does not name the host",
    );
    // A server that answers in plain HTTP.
    let plain = format!("https://127.0.0.1:{}", http_listener(1));
    refused(&["stats"], &plain, None, "did not answer in TLS");
    // With --json the TLS failure is JSON on standard error.
    let (code, err) = fails(cli(&["get", "tls", "j1", "--json"], &base, None));
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(json_of(&err)["error"]["code"], "tls", "{err}");
}
