//! What a destination holds that is secret, and how it is read or hidden: a webhook's
//! signing keys (`whsec_…`), the values of headers that carry credentials, a password in a
//! URL. Views and logs show none of them.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use reqwest::Url;

/// Standard base64 with or without its `=` padding, as the Standard Webhooks libraries read
/// a secret (the Python one appends `==` before decoding, so `whsec_` + 43 characters is
/// the same key as `whsec_` + 43 characters + `=`).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// The key of a `whsec_…` secret: the bytes its base64 part decodes to (24 to 64), padded
/// or not.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let b64 = secret.strip_prefix("whsec_").ok_or_else(|| {
        "a secret starts with \"whsec_\" and then the base64 of 24 to 64 random bytes (e.g. \"whsec_\" + `openssl rand -base64 32`)".to_string()
    })?;
    let key = LENIENT
        .decode(b64)
        .map_err(|e| format!("the part after \"whsec_\" is not standard base64 ({e}); use the letters, digits, '+' and '/', padded with '=' or not"))?;
    if !(24..=64).contains(&key.len()) {
        return Err(format!(
            "the secret's key is {} bytes; use 24 to 64 random bytes (e.g. `openssl rand -base64 32`)",
            key.len()
        ));
    }
    Ok(key)
}

/// Words that make a header's value a secret when its name contains one (compared without
/// case): `authorization`, `proxy-authorization`, `x-auth-user`, `cookie`, `x-api-key`,
/// `x-access-token`, `x-client-secret`, `x-password` …
const SECRET_WORDS: &[&str] = &[
    "auth",
    "cookie",
    "token",
    "secret",
    "key",
    "pass",
    "credential",
    "session",
    "signature",
];

/// True when a header named `name` carries a credential, so that views show its value as
/// `***`: its name contains `auth`, `cookie`, `token`, `secret`, `key`, `pass`,
/// `credential`, `session` or `signature`, in any case. Other headers (a tenant id, a
/// routing hint) are shown as they are.
pub fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// `url` with the password of its user part replaced by `***`.
pub fn masked_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_reads_with_or_without_its_padding_issue_36() {
        // See: issue 36.
        let padded = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let key = secret_key(padded).unwrap_or_default();
        assert_eq!(key.len(), 24);
        // 32 bytes: 43 characters and one '=' of padding, or none.
        let bytes = [0xfb_u8; 32];
        let with = base64::engine::general_purpose::STANDARD.encode(bytes);
        let without = with.trim_end_matches('=');
        assert_ne!(with, without);
        assert_eq!(secret_key(&format!("whsec_{with}")), Ok(bytes.to_vec()));
        assert_eq!(secret_key(&format!("whsec_{without}")), Ok(bytes.to_vec()));
        // The URL-safe alphabet is not what the libraries read: refused, saying what is.
        let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let refused = secret_key(&format!("whsec_{url_safe}")).unwrap_err();
        assert!(refused.contains("standard base64"), "{refused}");
    }

    #[test]
    fn only_headers_that_carry_credentials_are_secret_issue_36() {
        // See: issue 36.
        for name in [
            "authorization",
            "Proxy-Authorization",
            "cookie",
            "x-api-key",
            "X-Access-Token",
            "x-client-secret",
            "x-password",
            "x-session-id",
        ] {
            assert!(is_secret_header(name), "{name}");
        }
        for name in ["x-tenant", "accept", "user-agent", "x-request-source"] {
            assert!(!is_secret_header(name), "{name}");
        }
    }
}
