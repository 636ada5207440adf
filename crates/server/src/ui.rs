//! The dashboard (issue 15): a page served at `/ui` (the root redirects there) over the
//! server's own JSON API. Its files (`ui/index.html`, `ui/app.js`, `ui/app.css`) are built
//! into the binary: nothing is fetched at run time and users need no build step.
//!
//! The page needs no token to load (it holds no data); its API calls carry the bearer token
//! the user signs in with, kept in the tab's sessionStorage. Every call of the page carries
//! `x-delayq-ui: 1`: with [`UiMode::ReadOnly`] the server refuses the page's changes (`403
//! read_only`), while API clients keep their rights; with [`UiMode::Off`] there is no page.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use crate::AppState;
use crate::http::error::ApiError;

/// Whether the server serves the dashboard, and whether it may change anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UiMode {
    /// Served, with its actions (kick, delete, run now, push).
    #[default]
    On,
    /// Served, showing everything but changing nothing.
    ReadOnly,
    /// Not served.
    Off,
}

impl UiMode {
    /// The mode's name in flags and files: `on`, `read-only`, `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            UiMode::On => "on",
            UiMode::ReadOnly => "read-only",
            UiMode::Off => "off",
        }
    }
}

impl std::str::FromStr for UiMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(UiMode::On),
            "read-only" => Ok(UiMode::ReadOnly),
            "off" => Ok(UiMode::Off),
            other => Err(format!(
                "{other:?} is not a dashboard mode; give on, read-only or off"
            )),
        }
    }
}

/// The header every call of the dashboard carries.
pub const UI_HEADER: &str = "x-delayq-ui";

const INDEX: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const APP_CSS: &str = include_str!("../ui/app.css");

/// A file of the page, never cached across versions of the server.
fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// The page's routes (none with [`UiMode::Off`]); open, like `/healthz`.
pub fn routes(mode: UiMode) -> Router<AppState> {
    if mode == UiMode::Off {
        return Router::new();
    }
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui") }))
        .route(
            "/ui",
            get(|| async {
                let mut r = file("text/html; charset=utf-8", INDEX);
                r.headers_mut().insert(
                    header::CONTENT_SECURITY_POLICY,
                    header::HeaderValue::from_static(
                        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
                    ),
                );
                r
            }),
        )
        .route(
            "/ui/app.js",
            get(|| async { file("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { file("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/ui/config.json", get(config))
}

/// `GET /ui/config.json`: what the page needs to know before its first call.
async fn config(State(state): State<AppState>) -> Response {
    let body = serde_json::json!({
        "mode": state.config.ui.as_str(),
        "auth": !state.config.tokens.is_empty(),
    });
    axum::Json(body).into_response()
}

/// Middleware on the API: with [`UiMode::ReadOnly`], a change asked by the dashboard (a
/// request other than `GET` carrying [`UI_HEADER`]) is refused.
pub async fn read_only(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.config.ui == UiMode::ReadOnly
        && request.method() != Method::GET
        && request.headers().contains_key(UI_HEADER)
    {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "the dashboard is read-only on this server (--ui read-only); use the API or the CLI to change jobs",
        )
        .into_response();
    }
    next.run(request).await
}
