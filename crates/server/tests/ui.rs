//! The dashboard in a real browser (issue 15): headless Chromium driven through
//! chromedriver (WebDriver, with the `fantoccini` client), against a real server over the
//! embedded engine. Each view is visited and saved as a screenshot under
//! `target/ui-screenshots/`; each page is checked for script errors and for controls
//! without an accessible name. With `DELAYQ_UI_DOCS` set to a directory, the overview and a
//! topic page are also saved there as `overview.png` and `topic.png` (the
//! screenshots of docs/dashboard.md; `scripts/screenshots.sh` does this).
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium`, `chromium-driver`; the test
//! command, scripts/test.sh, installs them), or their paths in `DELAYQ_CHROMIUM` and
//! `DELAYQ_CHROMEDRIVER`. A missing one fails with that message; nothing is skipped.
//!
//! The file is long because every test shares one browser session and one server (starting
//! Chromium costs seconds); it walks the dashboard page by page, each test what a user sees
//! on one page.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use delayq_core::{Engine, Nack, NewJob, Reserve, Store, Topic};
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

/// With `DELAYQ_UI_DOCS` set, saves the current view there as `<name>.png` (the
/// screenshots of docs/dashboard.md, regenerated by `scripts/screenshots.sh`).
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

/// Waits for the sign-in page, signs in with [`TOKEN`] and waits for the overview.
async fn sign_in(c: &Client) {
    // The page draws its form from script after the load: finding `#token` at once can
    // come before it (a CI run failed so).
    wait_text(c, "h1", "Sign in").await;
    c.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    click(c, Locator::Css("form.signin button")).await;
    wait_text(c, "h1", "Topics").await;
}

/// Clicks the element `at` finds.
async fn click(c: &Client, at: Locator<'_>) {
    c.find(at).await.unwrap().click().await.unwrap();
}

async fn goto(c: &Client, s: &TestServer, hash: &str) {
    c.goto(&s.url(&format!("/ui{hash}"))).await.unwrap();
}

async fn state_of(e: &Arc<dyn Store>, topic: &Topic, id: &str) -> Option<String> {
    e.get(topic, &delayq_core::JobId::new(id).unwrap())
        .await
        .unwrap()
        .map(|j| j.state.to_string())
}

/// The embedded engine in `dir`.
fn embedded(dir: &Path) -> Arc<dyn Store> {
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
    sign_in(&c).await;

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

    // A paused topic with no jobs shows on the overview, paused, until resumed.
    // See: issue 36
    let held = Topic::new("held").unwrap();
    engine.pause(&held, None).await.unwrap();
    wait_text(&c, "table[aria-label=Topics] tbody tr", "held").await;
    let rows = table_rows(&c, "table[aria-label=Topics]").await;
    let row = rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some("held"))
        .unwrap_or_else(|| panic!("no row for held: {rows:?}"));
    assert_eq!(row.last().map(String::as_str), Some("yes"), "{row:?}");
    engine.resume(&held).await.unwrap();

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

/// The page's visible text (`document.body.innerText`, what a reader sees), checked for
/// what a script bug prints instead of a value: `[object …]`, `undefined`, `NaN`. Also
/// runs `check_view` (no script error, every control named) and saves a screenshot.
async fn visible_text(c: &Client, page: &str) -> String {
    check_view(c, &format!("text-{page}")).await;
    let text = c
        .execute("return document.body.innerText;", vec![])
        .await
        .unwrap();
    let text = text.as_str().unwrap().to_string();
    for bad in ["[object", "undefined", "NaN"] {
        assert!(
            !text.contains(bad),
            "the {page} page shows {bad:?} instead of a value:\n{text}"
        );
    }
    text
}

/// The visible text of each cell of each row of the table `css`, by row.
async fn table_rows(c: &Client, css: &str) -> Vec<Vec<String>> {
    let rows = c
        .execute(
            "return [...document.querySelectorAll(arguments[0] + ' tbody tr')]
               .map((tr) => [...tr.cells].map((td) => td.innerText.trim()));",
            vec![json!(css)],
        )
        .await
        .unwrap();
    serde_json::from_value(rows).unwrap()
}

/// The job page's fields as (term, visible text of its description), in order.
async fn job_fields(c: &Client) -> Vec<(String, String)> {
    let pairs = c
        .execute(
            "return [...document.querySelectorAll('main dl > dt')]
               .map((dt) => [dt.innerText.trim(), dt.nextElementSibling ? dt.nextElementSibling.innerText.trim() : null]);",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(pairs).unwrap()
}

/// Opens `hash` of the dashboard as a fresh page load (through `about:blank`), so that no
/// refresh of the page before can draw over it; the token stays in the tab's session.
async fn open(c: &Client, s: &TestServer, hash: &str) {
    c.goto("about:blank").await.unwrap();
    goto(c, s, hash).await;
}

/// A string field of a JSON answer, or "" when absent.
fn field(v: &Value, name: &str) -> String {
    v[name].as_str().map(str::to_string).unwrap_or_default()
}

/// Every page of the dashboard (sign-in, overview, a topic page and each of its state tabs,
/// the job page of a job in each state, a missing job, dead letters, schedules; empty and
/// full) shows its fields as text with the values the API answers, and none shows
/// `[object …]`, `undefined` or `NaN`. The job page once showed `[object HTMLElement],…`
/// instead of its fields, for every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_page_shows_its_fields_as_text_issue_36() {
    // See: issue 36
    let dir = tempfile::tempdir().unwrap();
    let engine = embedded(dir.path());
    let s = TestServer::start(
        engine,
        ServerConfig {
            tokens: vec![TOKEN.to_string()],
            ..ServerConfig::default()
        },
    )
    .await;
    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap();
    let c = browser(&driver, profile.path()).await;

    // The sign-in page, then the empty pages.
    open(&c, &s, "").await;
    wait_text(&c, "h1", "Sign in").await;
    let text = visible_text(&c, "sign-in").await;
    assert!(text.contains("Token"), "{text}");
    sign_in(&c).await;
    wait_text(&c, "main", "Jobs per minute").await;
    let text = visible_text(&c, "overview-empty").await;
    assert!(text.contains("No topic has jobs yet."), "{text}");
    assert!(text.contains("No delivery in the last hour."), "{text}");
    open(&c, &s, "#/dead").await;
    wait_text(&c, "h1", "Dead letters").await;
    let text = visible_text(&c, "dead-empty").await;
    assert!(text.contains("No dead job in any topic."), "{text}");
    open(&c, &s, "#/schedules").await;
    wait_text(&c, "h1", "Schedules").await;
    let text = visible_text(&c, "schedules-empty").await;
    assert!(text.contains("No schedule."), "{text}");

    // Seed, through the API, a job in each state of topic `billing` (which keeps acked
    // jobs): retry-1 nacked with an error (delayed for its 1 h back-off), dead-1 nacked on
    // its last attempt, done-1 acked, held-1 reserved, ready-1 ready, later-1 delayed with
    // an expiry.
    let t = "/v1/topics/billing";
    let (st, v) = s
        .call(
            "PUT",
            t,
            Some(json!({"retention": {"max_jobs": 10, "max_age_ms": 3_600_000}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let reserve_one = |id: &'static str| {
        let s = &s;
        async move {
            let (st, v) = s
                .post(
                    "/v1/reserve",
                    json!({"topics": ["billing"], "max": 1, "wait_ms": 5000}),
                )
                .await;
            assert_eq!(st, 200, "{v}");
            assert_eq!(v["jobs"][0]["job"]["id"], id, "{v}");
            v["jobs"][0]["token"].clone()
        }
    };
    let push = |req: Value| {
        let s = &s;
        async move {
            let (st, v) = s.post(&format!("{t}/jobs"), req).await;
            assert!(st == 200 || st == 201, "{st} {v}");
        }
    };
    push(
        json!({"id": "retry-1", "body": "{\"invoice\": 7}", "ttr_ms": 45_000, "max_attempts": 3,
                "priority": 5, "backoff": {"kind": "fixed", "base_ms": 3_600_000}}),
    )
    .await;
    let token = reserve_one("retry-1").await;
    let (st, v) = s
        .post(
            &format!("{t}/jobs/retry-1/nack"),
            json!({"token": token, "reason": "smtp timeout"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    push(json!({"id": "dead-1", "body": "card", "max_attempts": 1})).await;
    let token = reserve_one("dead-1").await;
    let (st, v) = s
        .post(
            &format!("{t}/jobs/dead-1/nack"),
            json!({"token": token, "reason": "card declined"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    push(json!({"id": "done-1", "body": "paid"})).await;
    let token = reserve_one("done-1").await;
    let (st, v) = s
        .post(&format!("{t}/jobs/done-1/ack"), json!({"token": token}))
        .await;
    assert_eq!(st, 204, "{v}");
    push(json!({"id": "held-1", "body": "working", "ttr_ms": 600_000})).await;
    reserve_one("held-1").await;
    push(json!({"id": "ready-1", "body": "waiting"})).await;
    push(
        json!({"id": "later-1", "body": "soon", "delay_ms": 3_600_000, "max_lateness_ms": 600_000}),
    )
    .await;
    let (st, v) = s
        .call(
            "PUT",
            "/v1/schedules/nightly",
            Some(json!({"cron": "30 2 * * *", "time_zone": "Europe/Berlin", "topic": "reports"})),
        )
        .await;
    assert_eq!(st, 200, "{v}");

    // What the API says of each job, and what the page should show of it: its state, ttr
    // and back-off as a reader reads them.
    let fixed_hour = "fixed 60 min";
    let default_backoff = "exponential from 1.0 s, ×2, up to 60 min, 10 % jitter";
    let jobs = [
        ("retry-1", "delayed", "45.0 s", fixed_hour),
        ("dead-1", "dead", "30.0 s", default_backoff),
        ("done-1", "done", "30.0 s", default_backoff),
        ("held-1", "reserved", "10 min", default_backoff),
        ("ready-1", "ready", "30.0 s", default_backoff),
        ("later-1", "delayed", "30.0 s", default_backoff),
    ];
    let mut api_jobs = Vec::new();
    for (id, state, _, _) in jobs {
        let (st, j) = s.get(&format!("{t}/jobs/{id}")).await;
        assert_eq!(st, 200, "{j}");
        assert_eq!(j["state"], state, "{j}");
        api_jobs.push(j);
    }
    let retry = &api_jobs[0];
    assert_eq!(retry["attempts"], 1, "{retry}");
    assert_eq!(retry["last_error"], "smtp timeout", "{retry}");
    assert_eq!(api_jobs[1]["last_error"], "card declined");
    assert!(api_jobs[3]["deadline"].is_string(), "a lease deadline");
    assert!(api_jobs[5]["expires_at"].is_string(), "an expiry");

    // The job page of each: every field, as text, with the API's values.
    for ((id, _, ttr, backoff), j) in jobs.iter().zip(&api_jobs) {
        open(&c, &s, &format!("#/job/billing/{id}")).await;
        wait_text(&c, "h1", &format!("Job {id}")).await;
        wait_for(&c, "pre[aria-label=Body]").await;
        let text = visible_text(&c, &format!("job-{id}")).await;
        let or_dash = |name: &str| match field(j, name) {
            v if v.is_empty() => "—".to_string(),
            v => v,
        };
        let expires = match field(j, "expires_at") {
            at if at.is_empty() => "—".to_string(),
            at => format!("{at} (then {})", field(j, "on_expire")),
        };
        let want: Vec<(String, String)> = [
            ("state", field(j, "state")),
            ("due", field(j, "ready_at")),
            (
                "attempts",
                format!("{} of {}", j["attempts"], j["max_attempts"]),
            ),
            ("priority", j["priority"].to_string()),
            ("ttr", ttr.to_string()),
            ("back-off", backoff.to_string()),
            ("deadline", or_dash("deadline")),
            ("last error", or_dash("last_error")),
            ("pushed", field(j, "created_at")),
            ("expires", expires),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(
            job_fields(&c).await,
            want,
            "the fields of job {id}; the page reads:\n{text}"
        );
        for (k, v) in &want {
            assert!(text.contains(&format!("{k}\n{v}")), "{k} {v} in:\n{text}");
        }
    }
    assert_eq!(retry["priority"], 5);

    // A missing job: the server's answer, as text.
    open(&c, &s, "#/job/billing/nobody").await;
    let alert = wait_for(&c, "p[role=alert]").await.text().await.unwrap();
    assert!(!alert.trim().is_empty(), "an empty error");
    visible_text(&c, "job-missing").await;

    // Each state tab of the topic page (and the page without one: ready) lists its jobs
    // with their due time, attempts, deadline and last error.
    for (hash, state) in [
        ("#/topic/billing", "ready"),
        ("#/topic/billing?state=ready", "ready"),
        ("#/topic/billing?state=delayed", "delayed"),
        ("#/topic/billing?state=reserved", "reserved"),
        ("#/topic/billing?state=dead", "dead"),
        ("#/topic/billing?state=done", "done"),
    ] {
        open(&c, &s, hash).await;
        let table = format!("table[aria-label='Jobs {state}']");
        wait_for(&c, &format!("{table}[data-prefix]")).await;
        let text = visible_text(&c, &format!("topic-{state}")).await;
        assert!(text.contains("Topic billing"), "{text}");
        assert!(text.contains("Running"), "{text}");
        let mut want: Vec<Vec<String>> = api_jobs
            .iter()
            .filter(|j| j["state"] == state)
            .map(|j| {
                vec![
                    String::new(),
                    field(j, "id"),
                    field(j, "ready_at"),
                    format!("{}/{}", j["attempts"], j["max_attempts"]),
                    field(j, "deadline"),
                    field(j, "last_error"),
                ]
            })
            .collect();
        want.sort();
        let mut got = table_rows(&c, &table).await;
        got.sort();
        assert_eq!(got, want, "the {state} jobs; the page reads:\n{text}");
    }

    // The overview: the topic's counts and next due time, and this server's last hour.
    open(&c, &s, "#/").await;
    wait_text(&c, "table[aria-label=Topics] a", "billing").await;
    wait_text(&c, "table[aria-label=Topics] a", "reports").await;
    wait_for(&c, "#lateness-histogram[data-total='4']").await;
    let text = visible_text(&c, "overview").await;
    let (st, stats) = s.get(&format!("{t}/stats")).await;
    assert_eq!(st, 200, "{stats}");
    // The schedule's next fire waits in its topic as a delayed job.
    let (st, v) = s.get("/v1/schedules").await;
    assert_eq!(st, 200, "{v}");
    let next_fire = field(&v["schedules"][0], "next_fire");
    let rows = table_rows(&c, "table[aria-label=Topics]").await;
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(
        rows[1],
        ["reports", "0", "1", "0", "0", "0", "—", "0", &next_fire, ""],
        "{text}"
    );
    let row = &rows[0];
    assert_eq!(
        row[..6],
        ["billing", "1", "2", "1", "1", "1"],
        "topic, ready, delayed, reserved, dead, done:\n{text}"
    );
    assert!(
        [" ms", " s", " min"].iter().any(|u| row[6].ends_with(u)),
        "oldest overdue {:?}",
        row[6]
    );
    assert_eq!(
        row[7..],
        [
            stats["expired_jobs"].to_string(),
            field(&stats, "next_due"),
            String::new()
        ],
        "expired, next due, paused:\n{text}"
    );
    for shown in [
        "pushed 6",
        "delivered 4",
        "acked 1",
        "dead 1",
        "last hour\t4",
    ] {
        assert!(text.contains(shown), "{shown:?} in:\n{text}");
    }

    // Dead letters: the dead job with its time of death, attempts and reason.
    open(&c, &s, "#/dead").await;
    wait_text(&c, "h2", "billing (1)").await;
    let text = visible_text(&c, "dead").await;
    let dead = &api_jobs[1];
    assert_eq!(
        table_rows(&c, "table[aria-label='Dead jobs of billing']").await,
        [[
            "dead-1".to_string(),
            field(dead, "deadline"),
            "1".to_string(),
            "card declined".to_string()
        ]],
        "{text}"
    );

    // Schedules: each with its cron, time zone, topic, misfire policy and next fire.
    open(&c, &s, "#/schedules").await;
    wait_text(&c, "table td", "nightly").await;
    let text = visible_text(&c, "schedules").await;
    let (st, v) = s.get("/v1/schedules").await;
    assert_eq!(st, 200, "{v}");
    let sched = &v["schedules"][0];
    assert_eq!(
        table_rows(&c, "table[aria-label=Schedules]").await,
        [[
            "nightly",
            "30 2 * * *",
            "Europe/Berlin",
            "reports",
            &field(sched, "misfire"),
            &field(sched, "next_fire"),
        ]],
        "{text}"
    );
    c.close().await.unwrap();
}

/// The overview's topic rows, by the text of their first cell (the topic's name, with its
/// badge), after a fresh load of the page: waits (bounded, 3 s) until a row shows `want` in
/// its first cell, or answers the rows as they are.
async fn topic_rows_showing(c: &Client, s: &TestServer, want: &str) -> Vec<Vec<String>> {
    open(c, s, "").await;
    wait_text(c, "h1", "Topics").await;
    let start = Instant::now();
    loop {
        let rows = table_rows(c, "table[aria-label=Topics]").await;
        if rows.iter().any(|r| r[0].contains(want)) || start.elapsed() > Duration::from_secs(3) {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// On a Redis Cluster whose primary of two topics stopped answering (SIGSTOP), the
/// overview shows those topics with an "unreachable" badge and "not reached" in place of
/// their counts (which it no longer waits for), and the healthy primary's topic with its
/// counts; once the primary answers again, every topic shows its counts and no badge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_whose_primary_stopped_answering_shows_unreachable_issue_37() {
    // See: issue 37
    let cluster = delayq_testkit::RedisCluster::start_for_stopping().await;
    // The stopped primary holds neither the topic registry nor the paused set, which the
    // topic list reads.
    let (stopped, healthy_node) = cluster.stoppable_and_healthy();
    let (stalled, healthy) = (
        stopped.topic_named("stalled"),
        healthy_node.topic_named("healthy"),
    );
    // A slot timeout of 2 s: a reserve that meets the stopped primary waits for it once.
    let config =
        delayq_redis::RedisConfig::new(cluster.url()).with_slot_timeout(Duration::from_secs(2));
    let engine = delayq_redis::RedisEngine::connect(config).await.unwrap();
    let s = TestServer::start(
        Arc::new(engine),
        ServerConfig {
            tokens: vec![TOKEN.to_string()],
            ..ServerConfig::default()
        },
    )
    .await;
    for t in [&stalled, &healthy] {
        for _ in 0..2 {
            let (st, v) = s
                .post(&format!("/v1/topics/{t}/jobs"), json!({"body": t}))
                .await;
            assert_eq!(st, 201, "{v}");
        }
    }
    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap();
    let c = browser(&driver, profile.path()).await;
    open(&c, &s, "").await;
    sign_in(&c).await;
    let rows = topic_rows_showing(&c, &s, &stalled).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter().all(|r| !r.join(" ").contains("unreachable")),
        "{rows:?}"
    );

    // The primary stops while the overview is open: its next refreshes wait on it for the
    // stalled topic's counts (nothing has marked it yet). They once piled up, one every
    // 2 s, until no page of the dashboard loaded at all.
    let stop = delayq_testkit::Stopped::new(cluster.server(stopped.port).pid().unwrap());
    let reserve_both = || async {
        let (st, v) = s
            .post(
                "/v1/reserve",
                json!({"topics": [&stalled, &healthy], "max": 1}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        v
    };
    // A reserve over both topics, as a worker's: it waits one slot timeout for the stopped
    // primary, answers the healthy topic's job and marks the other. The page then shows it
    // (again, should a loaded machine have let the mark run out before the page loaded).
    let mut rows = Vec::new();
    for _ in 0..3 {
        let v = reserve_both().await;
        assert_eq!(v["unreachable"], json!([&stalled]), "{v}");
        rows = topic_rows_showing(&c, &s, "unreachable").await;
        if rows.iter().any(|r| r[0].contains("unreachable")) {
            break;
        }
    }
    let text = visible_text(&c, "overview-unreachable").await;
    let row = |name: &str| {
        rows.iter()
            .find(|r| r[0].starts_with(name))
            .unwrap_or_else(|| panic!("no row of {name}: {rows:?}\n{text}"))
            .clone()
    };
    let bad = row(&stalled);
    assert_eq!(bad[0], format!("{stalled} unreachable"), "{rows:?}");
    assert_eq!(bad[1], "not reached", "{rows:?}");
    let good = row(&healthy);
    assert_eq!(good[0], healthy, "{rows:?}");
    // Its counts: one job reserved by the reserve above (or two, with a second pass), the
    // rest ready.
    assert!(
        good[1..3].iter().all(|n| n.parse::<u32>().is_ok()),
        "{rows:?}"
    );

    // The primary answers again: the probe of its shard is answered, and the page shows
    // every topic with its counts.
    drop(stop);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = reserve_both().await;
        if v["unreachable"] == json!([]) {
            break;
        }
        assert!(Instant::now() < deadline, "still unreachable: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows = topic_rows_showing(&c, &s, &stalled).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter().all(|r| !r.join(" ").contains("unreachable")
            && r[1..3].iter().all(|n| n.parse::<u32>().is_ok())),
        "{rows:?}"
    );
}
