//! Payload codecs: how a job body becomes the typed value a handler receives, and back.
//!
//! A payload type says its own wire format, so a producer and a consumer that share the
//! type cannot disagree on it: [`Json<T>`] for anything serde can handle, [`Bytes`] for the
//! raw body, [`String`] for UTF-8 text.

use std::any::type_name;
use std::fmt;
use std::ops::{Deref, DerefMut};

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A typed job payload: decoded from the job body before the handler runs, encoded by
/// producers.
///
/// A body that does not decode is a permanent failure: the worker buries the job at once
/// with a reason that names the format, the target type and what failed (retrying would
/// fail the same way).
///
/// ```
/// use delayq_worker::{Json, Payload};
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
/// struct CancelOrder {
///     order_id: u64,
/// }
///
/// let body = Json(CancelOrder { order_id: 42 }).encode()?;
/// assert_eq!(&body[..], br#"{"order_id":42}"#);
/// let back = Json::<CancelOrder>::decode(&body)?;
/// assert_eq!(back.order_id, 42); // `Json<T>` derefs to `T`.
///
/// let err = Json::<CancelOrder>::decode(&"{}".into()).unwrap_err();
/// assert!(err.to_string().contains("missing field `order_id`"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Payload: Sized + Send + 'static {
    /// The name of the wire format, for messages ("JSON", "raw bytes", "UTF-8 text").
    const FORMAT: &'static str;

    /// Decodes a job body.
    fn decode(body: &Bytes) -> Result<Self, DecodeError>;

    /// Encodes the payload into a job body.
    fn encode(&self) -> Result<Bytes, EncodeError>;
}

/// A payload carried as JSON through serde: the default format for typed payloads.
///
/// It dereferences to the inner value, so a handler reads `job.payload().field`; use
/// [`Json::into_inner`] (or `.0`) to take the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Json<T>(pub T);

impl<T> Json<T> {
    /// The inner value.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for Json<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Json<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> From<T> for Json<T> {
    fn from(value: T) -> Self {
        Json(value)
    }
}

impl<T> Payload for Json<T>
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    const FORMAT: &'static str = "JSON";

    fn decode(body: &Bytes) -> Result<Self, DecodeError> {
        serde_json::from_slice(body)
            .map(Json)
            .map_err(|e| DecodeError::new(Self::FORMAT, type_name::<T>(), body.len(), e))
    }

    fn encode(&self) -> Result<Bytes, EncodeError> {
        serde_json::to_vec(&self.0)
            .map(Bytes::from)
            .map_err(|e| EncodeError::new(Self::FORMAT, type_name::<T>(), e))
    }
}

/// The raw body, untouched. Never fails to decode.
impl Payload for Bytes {
    const FORMAT: &'static str = "raw bytes";

    fn decode(body: &Bytes) -> Result<Self, DecodeError> {
        Ok(body.clone())
    }

    fn encode(&self) -> Result<Bytes, EncodeError> {
        Ok(self.clone())
    }
}

/// The body as UTF-8 text; a body that is not valid UTF-8 does not decode.
impl Payload for String {
    const FORMAT: &'static str = "UTF-8 text";

    fn decode(body: &Bytes) -> Result<Self, DecodeError> {
        std::str::from_utf8(body)
            .map(str::to_owned)
            .map_err(|e| DecodeError::new(Self::FORMAT, "String", body.len(), e))
    }

    fn encode(&self) -> Result<Bytes, EncodeError> {
        Ok(Bytes::copy_from_slice(self.as_bytes()))
    }
}

/// A job body that does not decode into the handler's payload type.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot decode the job body ({len} bytes) as {format} into {target}: {message}; the producer pushed a body of another shape, fix it or push the job again with a valid body"
)]
pub struct DecodeError {
    format: &'static str,
    target: &'static str,
    len: usize,
    message: String,
}

impl DecodeError {
    /// Describes a failure to decode `len` bytes as `format` into the type `target`.
    pub fn new(
        format: &'static str,
        target: &'static str,
        len: usize,
        cause: impl fmt::Display,
    ) -> Self {
        DecodeError {
            format,
            target,
            len,
            message: cause.to_string(),
        }
    }

    /// What the format parser said.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A payload that cannot be encoded (for example a map with non-string keys in JSON).
#[derive(Debug, thiserror::Error)]
#[error("cannot encode {target} as {format}: {message}")]
pub struct EncodeError {
    format: &'static str,
    target: &'static str,
    message: String,
}

impl EncodeError {
    /// Describes a failure to encode the type `target` as `format`.
    pub fn new(format: &'static str, target: &'static str, cause: impl fmt::Display) -> Self {
        EncodeError {
            format,
            target,
            message: cause.to_string(),
        }
    }

    /// What the format encoder said.
    pub fn message(&self) -> &str {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Order {
        id: u64,
        note: String,
    }

    #[test]
    fn json_round_trip() {
        let order = Json(Order {
            id: 7,
            note: "é".into(),
        });
        let body = order.encode().expect("encodes");
        let back = Json::<Order>::decode(&body).expect("decodes");
        assert_eq!(back, order);
        assert_eq!(back.note, "é");
    }

    #[test]
    fn json_decode_error_names_format_type_and_cause() {
        let err =
            Json::<Order>::decode(&Bytes::from_static(b"{\"id\":\"x\"}")).expect_err("wrong shape");
        let msg = err.to_string();
        assert!(msg.contains("as JSON"), "{msg}");
        assert!(msg.contains("Order"), "{msg}");
        assert!(msg.contains("10 bytes"), "{msg}");
        assert!(msg.contains("invalid type"), "{msg}");
    }

    #[test]
    fn json_encode_error() {
        let mut map = HashMap::new();
        map.insert((1, 2), 3);
        let err = Json(map).encode().expect_err("tuple keys are not JSON");
        assert!(err.to_string().contains("as JSON"), "{err}");
    }

    #[test]
    fn raw_bytes_and_text() {
        let body = Bytes::from_static(&[0, 159, 255]);
        assert_eq!(Bytes::decode(&body).expect("raw"), body);
        let err = String::decode(&body).expect_err("not UTF-8");
        assert!(err.to_string().contains("UTF-8"), "{err}");
        let text = String::decode(&Bytes::from_static(b"hi")).expect("text");
        assert_eq!(text.encode().expect("text"), Bytes::from_static(b"hi"));
    }
}
