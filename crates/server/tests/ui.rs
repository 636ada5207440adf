//! The dashboard in a real browser (issue 15): headless Chromium driven through
//! chromedriver (WebDriver, with the `fantoccini` client), against a real server over the
//! embedded engine. Each view is visited and saved as a screenshot under
//! `target/ui-screenshots/`; each page is checked for script errors and for controls
//! without an accessible name. With `DELAYQ_UI_DOCS` set to a directory, the overview and a
//! topic page are also saved there as `overview.png` and `topic.png` (the README's
//! screenshots; `scripts/screenshots.sh` does this).
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium`, `chromium-driver`; the README's
//! test command installs them), or their paths in `DELAYQ_CHROMIUM` and
//! `DELAYQ_CHROMEDRIVER`. A missing one fails with that message; nothing is skipped.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use delayq_core::{Engine, Nack, NewJob, Reserve, Topic};
use delayq_server::{ServerConfig, UiMode};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

const TOKEN: &str = "a-dashboard-test-token";

/// A program from the environment variable `var`, else the first of `names` found on the
/// PATH (or as a path).
fn program(var: &str, names: &[&str]) -> PathBuf {
    if let Ok(p) = std::env::var(var) {
        return PathBuf::from(p);
    }
    for name in names {
        let p = Path::new(name);
        if p.is_absolute() && p.exists() {
            return p.to_path_buf();
        }
        if let Some(paths) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&paths) {
                if dir.join(name).exists() {
                    return dir.join(name);
                }
            }
        }
    }
    panic!(
        "{} not found: the browser tests need it (Debian: apt-get install chromium chromium-driver; scripts/test.sh installs them), or set {var}",
        names[0]
    );
}

/// chromedriver on a free loopback port, killed on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start() -> Self {
        let exe = program("DELAYQ_CHROMEDRIVER", &["chromedriver"]);
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&exe)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session with a profile of its own.
async fn browser(driver: &Driver, profile: &Path) -> Client {
    let chromium = program(
        "DELAYQ_CHROMIUM",
        &["chromium", "/usr/bin/chromium", "chromium-browser"],
    );
    let caps = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", format!("--user-data-dir={}", profile.display())]
        }
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!()
    };
    // chromedriver speaks plain HTTP on loopback: no TLS connector.
    ClientBuilder::new(HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .unwrap()
}

fn shots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves a screenshot of the current view, then checks the page: no script error so far,
/// and every button, link, input and select has an accessible name.
async fn check_view(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(shots_dir().join(format!("{name}.png")), png).unwrap();
    let errors = c
        .execute(
            "return window.__delayqErrors || ['no dashboard script'];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(errors, json!([]), "script errors on the {name} view");
    let unnamed = c
        .execute(
            r#"
            const name = (e) => (e.getAttribute('aria-label') || e.textContent || '').trim()
              || (e.id && document.querySelector(`label[for="${e.id}"]`)?.textContent.trim())
              || e.getAttribute('placeholder') || '';
            return [...document.querySelectorAll('button, a, input, select, textarea')]
              .filter((e) => !name(e)).map((e) => e.outerHTML);
            "#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        unnamed,
        json!([]),
        "controls without an accessible name on the {name} view"
    );
}

/// With `DELAYQ_UI_DOCS` set, saves the current view there as `<name>.png` (the README's
/// screenshots, regenerated by `scripts/screenshots.sh`).
async fn docs_shot(c: &Client, name: &str) {
    if let Some(dir) = std::env::var_os("DELAYQ_UI_DOCS") {
        let png = c.screenshot().await.unwrap();
        let path = Path::new(&dir).join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// The page's content, for a failed wait's message.
async fn main_html(c: &Client) -> String {
    match c.find(Locator::Css("main")).await {
        Ok(m) => m.html(false).await.unwrap_or_default(),
        Err(e) => e.to_string(),
    }
}

/// Waits (bounded) until `css` matches an element, and answers it.
async fn wait_for(c: &Client, css: &str) -> fantoccini::elements::Element {
    let start = Instant::now();
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            return e;
        }
        if start.elapsed() > Duration::from_secs(15) {
            let page = main_html(c).await;
            panic!("nothing matches {css} on the page: {page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Pushes 30 jobs of topic `emails` through the server's API and reserves them (10 some
/// 300 ms after they fell due, 20 as they fall due), then acks 27, buries 2 and nacks one on
/// its last attempt: what the overview's charts count.
async fn http_session(s: &TestServer) {
    let batch = |ids: std::ops::Range<u64>| -> Value {
        let jobs: Vec<Value> = ids
            .map(|i| json!({"id": format!("e{i}"), "body": "mail", "delay_ms": 20 * i, "max_attempts": 1}))
            .collect();
        json!({ "jobs": jobs })
    };
    let (st, v) = s.post("/v1/topics/emails/batch", batch(0..10)).await;
    assert_eq!(st, 200, "{v}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (st, v) = s.post("/v1/topics/emails/batch", batch(10..30)).await;
    assert_eq!(st, 200, "{v}");
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < 30 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "not all delivered"
        );
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": ["emails"], "max": 10, "wait_ms": 1000}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        got.extend(v["jobs"].as_array().unwrap().iter().cloned());
    }
    for (i, d) in got.iter().enumerate() {
        let (id, token) = (d["job"]["id"].as_str().unwrap(), &d["token"]);
        let (verb, want) = match i {
            0 | 1 => ("bury", 204),
            2 => ("nack", 200),
            _ => ("ack", 204),
        };
        let (st, v) = s
            .post(
                &format!("/v1/topics/emails/jobs/{id}/{verb}"),
                json!({ "token": token }),
            )
            .await;
        assert_eq!(st, want, "{verb} {id}: {v}");
    }
}

/// Waits (bounded) until `css` matches an element whose text contains `text`.
async fn wait_text(c: &Client, css: &str, text: &str) {
    let start = Instant::now();
    loop {
        if let Ok(els) = c.find_all(Locator::Css(css)).await {
            for e in els {
                if e.text().await.map(|t| t.contains(text)).unwrap_or(false) {
                    return;
                }
            }
        }
        if start.elapsed() > Duration::from_secs(15) {
            let page = main_html(c).await;
            panic!("no {css} with {text:?} on the page: {page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (bounded) until nothing matches `css`.
async fn wait_gone(c: &Client, css: &str) {
    let start = Instant::now();
    while !c.find_all(Locator::Css(css)).await.unwrap().is_empty() {
        if start.elapsed() > Duration::from_secs(15) {
            let page = main_html(c).await;
            panic!("{css} stays on the page: {page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clicks the element `at` finds.
async fn click(c: &Client, at: Locator<'_>) {
    c.find(at).await.unwrap().click().await.unwrap();
}

async fn goto(c: &Client, s: &TestServer, hash: &str) {
    c.goto(&s.url(&format!("/ui{hash}"))).await.unwrap();
}

async fn state_of(e: &Arc<dyn Engine>, topic: &Topic, id: &str) -> Option<String> {
    e.get(topic, &delayq_core::JobId::new(id).unwrap())
        .await
        .unwrap()
        .map(|j| j.state.to_string())
}

/// The embedded engine in `dir`.
fn embedded(dir: &Path) -> Arc<dyn Engine> {
    let config = delayq_sqlite::SqliteConfig::dir(dir.join("data"));
    Arc::new(delayq_sqlite::SqliteEngine::open(config).unwrap())
}

/// Sign in, see a pushed job appear, kick a dead job and see it move, bulk-delete a filtered
/// selection, and visit the job, dead-letter and schedule views; then read-only mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_browser_issue_15() {
    // See: issue 15
    let dir = tempfile::tempdir().unwrap();
    let engine = embedded(dir.path());
    let s = TestServer::start(
        engine.clone(),
        ServerConfig {
            tokens: vec![TOKEN.to_string()],
            ..ServerConfig::default()
        },
    )
    .await;
    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap();
    let c = browser(&driver, profile.path()).await;

    // Sign in.
    goto(&c, &s, "").await;
    wait_text(&c, "h1", "Sign in").await;
    check_view(&c, "sign-in").await;
    c.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    click(&c, Locator::Css("form.signin button")).await;
    wait_text(&c, "h1", "Topics").await;

    // A pushed job appears on the overview (it refreshes itself).
    let orders = Topic::new("orders").unwrap();
    engine
        .push(
            NewJob::new(orders.clone(), "{\"order\": 42}")
                .with_id(delayq_core::JobId::new("a1").unwrap()),
        )
        .await
        .unwrap();
    wait_text(&c, "table[aria-label=Topics] a", "orders").await;

    // What the server did shows in the overview's charts, with numbers in their names.
    http_session(&s).await;
    wait_text(&c, "h2", "per server, since it started").await;
    let chart = wait_for(&c, "#activity-chart[data-acked='27']").await;
    let label = chart.attr("aria-label").await.unwrap().unwrap();
    assert!(
        label.contains("30 pushed, 30 delivered, 27 acked, 3 dead"),
        "{label}"
    );
    assert_eq!(chart.attr("role").await.unwrap().as_deref(), Some("img"));
    let histogram = wait_for(&c, "#lateness-histogram[data-total='30']").await;
    let label = histogram.attr("aria-label").await.unwrap().unwrap();
    assert!(
        label.starts_with("Lateness of the 30 deliveries of the last hour"),
        "{label}"
    );
    assert!(
        !c.find_all(Locator::Css("#lateness-histogram rect.bar"))
            .await
            .unwrap()
            .is_empty()
    );
    let percentiles = c
        .find(Locator::Css("table[aria-label='Lateness percentiles']"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(percentiles.contains("last hour 30"), "{percentiles}");
    check_view(&c, "overview").await;
    docs_shot(&c, "overview").await;

    // A dead job, kicked from the topic page, becomes ready.
    engine
        .push(
            NewJob::new(orders.clone(), "will fail")
                .with_id(delayq_core::JobId::new("dead1").unwrap())
                .with_max_attempts(1)
                .with_priority(0),
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    while !got
        .iter()
        .any(|d: &delayq_core::Delivery| d.job.id.as_str() == "dead1")
    {
        got = engine
            .reserve(&Reserve::new(orders.clone()).max(10))
            .await
            .unwrap();
        for d in &got {
            let lease = d.lease.clone().unwrap();
            if d.job.id.as_str() == "dead1" {
                engine.nack(&lease, Nack::default()).await.unwrap();
            } else {
                engine.release(&lease).await.unwrap();
            }
        }
    }
    assert_eq!(
        state_of(&engine, &orders, "dead1").await.as_deref(),
        Some("dead")
    );
    goto(&c, &s, "#/topic/orders?state=dead").await;
    wait_text(&c, "table a", "dead1").await;
    check_view(&c, "topic-dead").await;
    click(&c, Locator::Css("input[aria-label='Select dead1']")).await;
    click(&c, Locator::XPath("//button[normalize-space()='Kick']")).await;
    let start = Instant::now();
    while state_of(&engine, &orders, "dead1").await.as_deref() != Some("ready") {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the kick did not land"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Bulk delete of a filtered selection: x1..x3 go, y1 stays.
    for id in ["x1", "x2", "x3", "y1"] {
        engine
            .push(
                NewJob::new(orders.clone(), format!("job {id}"))
                    .with_id(delayq_core::JobId::new(id).unwrap()),
            )
            .await
            .unwrap();
    }
    goto(&c, &s, "#/topic/orders?state=ready").await;
    wait_text(&c, "table a", "y1").await;
    let pager = c
        .find(Locator::Css("#pager"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(pager, "", "a page with no next page shows no pager");
    docs_shot(&c, "topic").await;
    c.find(Locator::Css("input[type=search]"))
        .await
        .unwrap()
        .send_keys("x")
        .await
        .unwrap();
    // The filter asks the server once typing stops.
    wait_for(&c, "table[data-prefix='x']").await;
    click(
        &c,
        Locator::Css("input[aria-label='Select every job shown']"),
    )
    .await;
    check_view(&c, "topic-ready-filtered").await;
    click(&c, Locator::XPath("//button[normalize-space()='Delete']")).await;
    let start = Instant::now();
    while state_of(&engine, &orders, "x3").await.is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the bulk delete did not land"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in ["x1", "x2"] {
        assert_eq!(state_of(&engine, &orders, id).await, None, "{id}");
    }
    assert_eq!(
        state_of(&engine, &orders, "y1").await.as_deref(),
        Some("ready"),
        "not selected"
    );
    // The page shows the topic again, its filter kept: nothing starts with x now.
    wait_gone(&c, "table[data-prefix='x'] tbody tr").await;

    // Pause and resume the topic from its page.
    click(
        &c,
        Locator::XPath("//button[normalize-space()='Pause topic']"),
    )
    .await;
    wait_text(&c, "#paused-state", "Paused until resumed").await;
    assert!(engine.stats(&orders).await.unwrap().paused_until.is_some());
    click(
        &c,
        Locator::XPath("//button[normalize-space()='Resume topic']"),
    )
    .await;
    wait_text(&c, "#paused-state", "Running").await;
    assert_eq!(engine.stats(&orders).await.unwrap().paused_until, None);

    // The job view (a JSON body pretty-printed), dead letters, schedules.
    goto(&c, &s, "#/job/orders/a1").await;
    wait_text(&c, "pre", "\"order\": 42").await;
    check_view(&c, "job").await;
    let (st, _) = s
        .call(
            "PUT",
            "/v1/schedules/nightly",
            Some(json!({"cron": "30 2 * * *", "time_zone": "Europe/Berlin", "topic": "reports"})),
        )
        .await;
    assert_eq!(st, 200);
    goto(&c, &s, "#/schedules").await;
    wait_text(&c, "table td", "nightly").await;
    check_view(&c, "schedules").await;
    goto(&c, &s, "#/dead").await;
    wait_text(&c, "h1", "Dead letters").await;
    check_view(&c, "dead-letters").await;
    c.close().await.unwrap();

    // Read-only: the same views, no action, and the server refuses the page's changes.
    let ro = TestServer::start(
        engine.clone(),
        ServerConfig {
            ui: UiMode::ReadOnly,
            ..ServerConfig::default()
        },
    )
    .await;
    let profile = tempfile::tempdir().unwrap();
    let c = browser(&driver, profile.path()).await;
    goto(&c, &ro, "#/topic/orders?state=ready").await;
    wait_text(&c, "table a", "y1").await;
    wait_text(&c, "#mode", "read-only").await;
    for label in ["Kick", "Run now", "Bury", "Delete"] {
        let b = c
            .find(Locator::XPath(&format!(
                "//button[normalize-space()='{label}']"
            )))
            .await
            .unwrap();
        assert!(
            b.attr("disabled").await.unwrap().is_some(),
            "{label} is enabled"
        );
    }
    assert!(
        c.find(Locator::Css("#push-body")).await.is_err(),
        "the push form is shown"
    );
    check_view(&c, "read-only").await;
    let refused: Value = c
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
               fetch('/v1/topics/orders/jobs/y1', {method: 'DELETE', headers: {'x-delayq-ui': '1'}})
                 .then(async (r) => done([r.status, (await r.json()).error.code]));"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(refused, json!([403, "read_only"]));
    assert_eq!(
        state_of(&engine, &orders, "y1").await.as_deref(),
        Some("ready")
    );
    c.close().await.unwrap();

    // Off: no page.
    let off = TestServer::start(
        engine,
        ServerConfig {
            ui: UiMode::Off,
            ..ServerConfig::default()
        },
    )
    .await;
    assert_eq!(off.text("/ui").await.0, 404);
}

/// Waits (bounded) until `done` holds, polling the engine.
async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{what} did not land"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The topic page's filter asks the server, and "Select all N that match" acts on every
/// match through the bulk endpoint: a filtered bulk delete of 120 jobs, over three pages of
/// 50, leaves the others; a Bury sends a delayed job to dead, where the dead tab shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_all_that_match_and_bury_issue_15() {
    // See: issue 15
    let dir = tempfile::tempdir().unwrap();
    let engine = embedded(dir.path());
    let s = TestServer::start(engine.clone(), ServerConfig::default()).await;
    let t = Topic::new("many").unwrap();
    let job =
        |id: String| NewJob::new(t.clone(), "x").with_id(delayq_core::JobId::new(id).unwrap());
    let mut jobs: Vec<NewJob> = (0..120).map(|i| job(format!("gone-{i:03}"))).collect();
    jobs.extend((0..5).map(|i| job(format!("keep-{i}"))));
    engine.push_batch(jobs).await.unwrap();
    engine
        .push(job("later".into()).with_delay(Duration::from_secs(3600)))
        .await
        .unwrap();

    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap();
    let c = browser(&driver, profile.path()).await;
    goto(&c, &s, "#/topic/many?state=ready").await;
    wait_text(&c, "#select-all", "Select all 125 that match").await;
    c.find(Locator::Css("input[type=search]"))
        .await
        .unwrap()
        .send_keys("gone-")
        .await
        .unwrap();
    wait_for(&c, "table[data-prefix='gone-']").await;
    wait_text(&c, "#pager a", "Next page").await;
    click(&c, Locator::Css("#select-all")).await;
    wait_text(
        &c,
        "#selection",
        "whose id starts with “gone-” are selected",
    )
    .await;
    check_view(&c, "topic-select-all").await;
    click(&c, Locator::XPath("//button[normalize-space()='Delete']")).await;
    until("the bulk delete", || async {
        engine.stats(&t).await.unwrap().ready == 5
    })
    .await;
    for i in 0..5 {
        assert_eq!(
            state_of(&engine, &t, &format!("keep-{i}")).await.as_deref(),
            Some("ready")
        );
    }
    // The page shows what is left, its filter kept: nothing.
    wait_gone(&c, "table[data-prefix='gone-'] tbody tr").await;

    // Bury a delayed job; the dead tab lists it with its reason.
    goto(&c, &s, "#/topic/many?state=delayed").await;
    wait_text(&c, "table a", "later").await;
    click(&c, Locator::Css("input[aria-label='Select later']")).await;
    click(&c, Locator::XPath("//button[normalize-space()='Bury']")).await;
    until("the bury", || async {
        state_of(&engine, &t, "later").await.as_deref() == Some("dead")
    })
    .await;
    wait_gone(&c, "table[aria-label='Jobs delayed'] tbody tr").await;
    goto(&c, &s, "#/topic/many?state=dead").await;
    wait_text(&c, "table a", "later").await;
    wait_text(&c, "table td", "buried from the dashboard").await;
    check_view(&c, "topic-dead-buried").await;
    c.close().await.unwrap();
}
