//! Extractors whose rejections are [`ApiError`]s, so a malformed request gets the same JSON
//! error shape as every other failure; a body that does not decode is answered with the
//! field's pointer, code and what it accepts (see `fields`).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::fields::{decode_error, not_json, query_error};

/// A JSON request body with [`ApiError`] rejections that name the field at fault.
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !json_content_type(req.headers()) {
            return Err(ApiError::invalid_request(
                "the body must be JSON: send it with the header content-type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await?;
        decode(&bytes).map(Json)
    }
}

/// Decodes a JSON body; a failure names the field at fault, with its own code and what it
/// accepts.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| decode_error(bytes, e))?;
    de.end().map_err(|e| not_json(&e))?;
    Ok(value)
}

/// Whether the content type is `application/json` or `application/<something>+json`.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    }
}

/// `axum::extract::Path` with [`ApiError`] rejections.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

/// The query string, decoded as `axum::extract::Query` does, with [`ApiError`] rejections
/// that name the parameter at fault, with its own code and what it accepts.
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(Query)
            .map_err(|e| query_error(query, e))
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the request body is over the server's limit; send a smaller body or raise --max-request-bytes",
            );
        }
        ApiError::invalid_request(format!(
            "the body could not be read ({}); send it again",
            r.body_text()
        ))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::invalid_request(r.body_text())
    }
}
