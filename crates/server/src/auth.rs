//! Optional bearer-token authentication, compared in constant time.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::http::error::ApiError;

/// Lets a request through when no tokens are configured or it carries one of them as
/// `Authorization: Bearer <token>` (the scheme in any case).
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.config.tokens.is_empty() {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .map(str::as_bytes);
    let ok = given.is_some_and(|given| {
        // Every token is compared, so the time taken does not say which one nearly matched.
        state
            .config
            .tokens
            .iter()
            .fold(0u8, |hit, t| hit | t.as_bytes().ct_eq(given).unwrap_u8())
            == 1
    });
    if ok {
        return next.run(request).await;
    }
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong bearer token; send Authorization: Bearer <token>",
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// The token of an `Authorization` value with the `Bearer` scheme. The scheme is
/// case-insensitive (RFC 7235 section 2.1) and one or more spaces separate it from the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_scheme_is_case_insensitive() {
        for v in ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR  abc"] {
            assert_eq!(bearer_token(v), Some("abc"), "{v}");
        }
        for v in ["Basic abc", "Bearer", "Bearer ", "Bearerabc", "abc"] {
            assert_eq!(bearer_token(v), None, "{v}");
        }
    }
}
