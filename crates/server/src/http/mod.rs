//! The HTTP router: API v1 (documented in the OpenAPI document it serves), health, readiness
//! and metrics, with auth, limits, timeouts and load shedding as layers.

mod destinations;
pub mod dto;
pub mod error;
pub mod extract;
mod fields;
mod jobs;
mod leases;
mod limit;
mod manage;
mod observe;
mod ops;
pub mod params;
mod receipt;
mod scan;
mod schedules;
mod series;
mod topics;

pub use destinations::{DestinationType, DestinationView};
pub use manage::ArchiveRequest;
pub use schedules::{MisfireDto, ScheduleDto, ScheduleRequest, SchedulesResponse};

use std::sync::Arc;

use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{BoxError, Router};
use tower::ServiceBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::error::ApiError;
use crate::AppState;
use crate::auth::require_token;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "delayq",
        description = "A distributed delay queue: push jobs with a delay or a due time, reserve them when they are due (long-poll), then ack, nack, touch, bury or release them with their lease token.",
        license(name = "MIT OR Apache-2.0")
    ),
    tags(
        (name = "jobs", description = "Push, read, delete, reschedule and list jobs"),
        (name = "leases", description = "Reserve jobs and answer for their deliveries"),
        (name = "topics", description = "Topics: stats, settings, dead jobs, purge"),
        (name = "schedules", description = "Recurring jobs: a cron expression in a time zone, run by every server"),
        (name = "series", description = "What this server did over the last hour, per server since it started (the dashboard's charts)")
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail, dto::PushBatchFailed)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        openapi.security = Some(vec![
            utoipa::openapi::security::SecurityRequirement::new("bearer", Vec::<String>::new()),
            utoipa::openapi::security::SecurityRequirement::default(),
        ]);
    }
}

/// The API v1 routes and their OpenAPI document.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(jobs::push, jobs::list_jobs))
        .routes(routes!(jobs::push_batch))
        .routes(routes!(jobs::get_job, jobs::delete_job))
        .routes(routes!(jobs::reschedule))
        .routes(routes!(manage::archive))
        .routes(routes!(manage::bulk))
        .routes(routes!(leases::reserve))
        .routes(routes!(leases::ack))
        .routes(routes!(leases::ack_batch))
        .routes(routes!(leases::nack))
        .routes(routes!(leases::touch))
        .routes(routes!(leases::bury))
        .routes(routes!(leases::release))
        .routes(routes!(topics::list_topics))
        .routes(routes!(topics::stats))
        .routes(routes!(topics::kick))
        .routes(routes!(topics::kick_all))
        .routes(routes!(topics::pause))
        .routes(routes!(topics::resume))
        .routes(routes!(
            topics::get_config,
            topics::set_config,
            topics::purge
        ))
        .routes(routes!(
            destinations::get_destination,
            destinations::put_destination,
            destinations::delete_destination
        ))
        .routes(routes!(schedules::list_schedules))
        .routes(routes!(
            schedules::get_schedule,
            schedules::put_schedule,
            schedules::delete_schedule
        ))
        .routes(routes!(series::series))
        .split_for_parts()
}

/// The OpenAPI document of API v1, as served at `/v1/openapi.json`.
pub fn openapi_json() -> String {
    api()
        .1
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The whole application: `/v1/...`, `/v1/openapi.json`, `/healthz`, `/readyz`, `/metrics`.
/// With tokens set, the API and `/metrics` need one (`/metrics` not with `metrics_public`);
/// the health checks and the OpenAPI document never do.
pub fn app(state: AppState) -> Router {
    let (api, doc) = api();
    let doc = Arc::new(doc.to_pretty_json().unwrap_or_default());
    let config = state.config.clone();

    let metrics = Router::new().route("/metrics", get(ops::metrics));
    let (api, open) = if config.metrics_public {
        (api, metrics)
    } else {
        (api.merge(metrics), Router::new())
    };
    let protected = api
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::ui::read_only,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_token,
        ))
        .layer(DefaultBodyLimit::max(config.max_request_bytes));
    let open = open
        .merge(crate::ui::routes(config.ui))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route(
            "/v1/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        doc.as_str().to_owned(),
                    )
                }
            }),
        );

    Router::new()
        .merge(protected)
        .merge(open)
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such route; see /v1/openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method; see /v1/openapi.json",
            )
        })
        .with_state(state.clone())
        .layer(
            ServiceBuilder::new()
                .layer(axum::middleware::from_fn_with_state(
                    crate::listen::keep_alive_hint(config.request_timeout),
                    crate::listen::announce_idle_timeout,
                ))
                // Failed requests are logged where they fail (`ApiError`, in bursts), not
                // once more here.
                .layer(tower_http::trace::TraceLayer::new_for_http().on_failure(()))
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    observe::observe,
                ))
                // `Router::layer` wraps each route apart: the limits live in the shared
                // semaphores of `Slots`, not in a per-route tower layer.
                .layer(axum::middleware::from_fn_with_state(
                    limit::Slots::new(config.concurrency, config.max_long_polls),
                    limit::shed,
                ))
                .layer(HandleErrorLayer::new(|e: BoxError| async move {
                    timeout_error(e).into_response()
                }))
                .timeout(config.request_timeout),
        )
}

fn timeout_error(e: BoxError) -> ApiError {
    if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request took too long; retry",
        )
    } else {
        tracing::error!(error = %e, "unhandled service error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }
}
