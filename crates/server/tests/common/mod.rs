//! A real server on a free loopback port, over an engine, with a real HTTP client.

#![allow(dead_code)] // Each test file uses a different part.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::Store;
use delayq_server::{AppState, ServerConfig};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server.
pub struct TestServer {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Serves `engine` with `config` on 127.0.0.1:0.
    pub async fn start(engine: Arc<dyn Store>, config: ServerConfig) -> Self {
        let token = config.tokens.first().cloned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let state = AppState::new(engine, config);
        let task = tokio::spawn(delayq_server::serve(listener, state, async move {
            let _ = stopped.await;
        }));
        TestServer {
            addr,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
            token,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// Sends a request with an optional JSON body; returns the status and the JSON answer
    /// (Null when the body is empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self.auth(self.client.request(method, self.url(path)));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, json)
    }

    /// POSTs `body` exactly as written (for JSON that `serde_json::Value` cannot hold, such
    /// as `99999999999999999999`).
    pub async fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        let resp = self
            .auth(self.client.post(self.url(path)))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("request");
        answer(resp).await
    }

    /// POSTs `body` as the dashboard does (with its `x-delayq-ui` header), which a
    /// read-only dashboard's server refuses.
    pub async fn post_from_ui(&self, path: &str, body: Value) -> (u16, Value) {
        let resp = self
            .auth(self.client.post(self.url(path)))
            .header("x-delayq-ui", "1")
            .json(&body)
            .send()
            .await
            .expect("request");
        answer(resp).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, None).await
    }

    /// Plain text of a GET (for /metrics, /healthz).
    pub async fn text(&self, path: &str) -> (u16, String) {
        let resp = self
            .auth(self.client.get(self.url(path)))
            .send()
            .await
            .expect("request");
        (resp.status().as_u16(), resp.text().await.expect("body"))
    }

    /// Triggers the graceful shutdown and waits for the server to finish.
    pub async fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("server stopped in time")
                .expect("server task")
                .expect("serve");
        }
    }

    /// Triggers the shutdown without waiting.
    pub fn begin_shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The error code of an error answer.
/// A response's status and JSON body (a string when it is not JSON).
async fn answer(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<no code>")
}
