//! Strict request decoding (docs/http-api.md#strict-decoding): exactly one JSON object, no unknown
//! members, `null` means the zero value, byte fields are padded standard
//! base64.

use std::collections::BTreeMap;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};

use super::ApiError;

/// Standard alphabet, padding required; trailing bits tolerated as Go does.
const STRICT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes a request body into `T`; any failure is `400 invalid_argument`.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    // serde would also fill a struct from an array, positionally.
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(ApiError::invalid(
            "invalid request body: expected a JSON object",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("invalid request body: {e}")))
}

/// `null` or absent → the type's zero value; wrong types still fail.
pub fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A base64 byte field: padded standard base64; embedded CR/LF tolerated.
/// Decodes from the request's own text (borrowed whenever it holds no JSON
/// escape), so a body exists only once more, decoded: copying the text
/// first would briefly hold a 1 MiB body's base64 twice over.
pub fn base64_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    struct Base64Visitor;

    impl<'de> Visitor<'de> for Base64Visitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Vec<u8>, E> {
            let decoded = if text.contains(['\r', '\n']) {
                let cleaned: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
                STRICT_BASE64.decode(cleaned.as_bytes())
            } else {
                STRICT_BASE64.decode(text.as_bytes())
            };
            decoded.map_err(|e| E::custom(format!("illegal base64 data: {e}")))
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<u8>, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Vec<u8>, E> {
            Ok(Vec::new())
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<u8>, D::Error> {
            d.deserialize_str(self)
        }
    }

    d.deserialize_option(Base64Visitor)
}

/// `properties`: string values only; a `null` value reads as "".
pub fn string_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let map: Option<BTreeMap<String, Option<String>>> = Option::deserialize(d)?;
    Ok(map
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or_default()))
        .collect())
}
