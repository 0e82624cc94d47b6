//! SaslHandshake and SaslAuthenticate: the connection's [`Session`](crate::auth::Session)
//! answers them; on a PLAINTEXT listener both answer ILLEGAL_SASL_STATE, as Kafka's do.

use std::ops::RangeInclusive;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::registry::Api;
use super::Call;
use crate::shutdown::Shutdown;

pub(crate) struct SaslHandshake;

impl Api for SaslHandshake {
    const KEY: ApiKey = ApiKey::SaslHandshake;
    /// v0: the tokens follow as bare frames; v1 (KIP-152): in SaslAuthenticate requests.
    const VERSIONS: RangeInclusive<i16> = 0..=1;
    type Request = SaslHandshakeRequest;

    async fn handle(
        call: &Call<'_>,
        request: SaslHandshakeRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<SaslHandshakeResponse> {
        let (code, mechanisms) = call.session.handshake(&request.mechanism, call.version);
        Some(
            SaslHandshakeResponse::default()
                .with_error_code(code)
                .with_mechanisms(
                    mechanisms
                        .into_iter()
                        .map(StrBytes::from_static_str)
                        .collect(),
                ),
        )
    }
}

pub(crate) struct SaslAuthenticate;

impl Api for SaslAuthenticate {
    const KEY: ApiKey = ApiKey::SaslAuthenticate;
    /// v1 adds the session lifetime (0 here: no re-authentication), v2 is flexible.
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Request = SaslAuthenticateRequest;

    async fn handle(
        call: &Call<'_>,
        request: SaslAuthenticateRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<SaslAuthenticateResponse> {
        let response = match call.session.authenticate(&request.auth_bytes) {
            // No error message on success (Kafka sends null; the default is "").
            Ok(token) => SaslAuthenticateResponse::default()
                .with_error_message(None)
                .with_auth_bytes(Bytes::from(token)),
            Err((code, message)) => SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
        };
        Some(response)
    }
}
