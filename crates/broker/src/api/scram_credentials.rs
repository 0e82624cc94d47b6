//! DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the SCRAM users of
//! the SASL listeners, managed at run time as Kafka's `ScramControlManager` does (and kept in
//! the data directory, see [`Users`](crate::auth::Users)). With `--authorizer`, describing
//! needs DESCRIBE on the cluster and altering ALTER (CLUSTER_AUTHORIZATION_FAILED).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::codes;
use super::registry::Api;
use super::Call;
use crate::acl::Operation;
use crate::auth::{Change, ScramCredential, ScramHash};
use crate::shutdown::Shutdown;

use super::codes::{DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL};
use crate::auth::codes::UNSUPPORTED_SASL_MECHANISM;

/// Kafka's bounds on a SCRAM credential's iterations (`ScramMechanism`).
const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;

/// Kafka's mechanism codes (`ScramMechanism`): 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
fn mechanism(code: i8) -> Option<ScramHash> {
    match code {
        1 => Some(ScramHash::Sha256),
        2 => Some(ScramHash::Sha512),
        _ => None,
    }
}

fn code_of(hash: ScramHash) -> i8 {
    match hash {
        ScramHash::Sha256 => 1,
        ScramHash::Sha512 => 2,
    }
}

fn message(s: String) -> Option<StrBytes> {
    Some(StrBytes::from_string(s))
}

fn describe(
    call: &Call<'_>,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let refuse = |code: i16, text: &str| {
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(code)
            .with_error_message(message(text.to_string()))
    };
    if !call.may_cluster(Operation::Describe) {
        return refuse(
            codes::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        );
    }
    let known = call.context.scram_users.describe();
    let infos = |creds: &[(ScramHash, u32)]| {
        creds
            .iter()
            .map(|(h, i)| {
                CredentialInfo::default()
                    .with_mechanism(code_of(*h))
                    .with_iterations(i32::try_from(*i).unwrap_or(i32::MAX))
            })
            .collect()
    };
    let results = match request.users.as_deref() {
        // null or empty: every user
        None | Some([]) => known
            .iter()
            .map(|(user, creds)| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user.clone()))
                    .with_credential_infos(infos(creds))
            })
            .collect(),
        Some(asked) => {
            let mut seen = BTreeMap::new();
            for u in asked {
                *seen.entry(u.name.to_string()).or_insert(0) += 1;
            }
            asked
                .iter()
                .map(|u| u.name.to_string())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|user| {
                    let result = DescribeUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user.clone()));
                    if seen.get(&user).copied().unwrap_or(0) > 1 {
                        return result.with_error_code(DUPLICATE_RESOURCE).with_error_message(
                            message(format!(
                                "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                            )),
                        );
                    }
                    match known.get(&user) {
                        Some(creds) => result.with_credential_infos(infos(creds)),
                        None => result.with_error_code(RESOURCE_NOT_FOUND).with_error_message(
                            message(format!(
                                "Attempt to describe a user credential that does not exist: {user}"
                            )),
                        ),
                    }
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// A user's refusal: Kafka's code and message.
type Refusal = (i16, String);

/// One user's alterations, checked: the changes, or the user's error.
fn check_user(
    user: &str,
    deletions: &[&alter_user_scram_credentials_request::ScramCredentialDeletion],
    upsertions: &[&alter_user_scram_credentials_request::ScramCredentialUpsertion],
    known: Option<&Vec<(ScramHash, u32)>>,
) -> Result<Vec<Change>, Refusal> {
    if user.is_empty() {
        return Err((UNACCEPTABLE_CREDENTIAL, "Username must not be empty".into()));
    }
    let mut touched = BTreeSet::new();
    // each mechanism of a user at most once per request
    let mut once = |code: i8| -> Result<ScramHash, Refusal> {
        let hash = mechanism(code).ok_or_else(|| {
            (
                UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism".to_string(),
            )
        })?;
        if !touched.insert(code_of(hash)) {
            return Err((
                DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request".into(),
            ));
        }
        Ok(hash)
    };
    let mut changes = Vec::new();
    for d in deletions {
        let hash = once(d.mechanism)?;
        if !known.is_some_and(|k| k.iter().any(|(h, _)| *h == hash)) {
            return Err((
                RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist".into(),
            ));
        }
        changes.push(Change::Delete(user.to_string(), hash));
    }
    for u in upsertions {
        let hash = once(u.mechanism)?;
        if u.iterations < MIN_ITERATIONS {
            return Err((UNACCEPTABLE_CREDENTIAL, "Too few iterations".into()));
        }
        if u.iterations > MAX_ITERATIONS {
            return Err((UNACCEPTABLE_CREDENTIAL, "Too many iterations".into()));
        }
        if u.salt.is_empty() || u.salted_password.is_empty() {
            return Err((
                UNACCEPTABLE_CREDENTIAL,
                "The salt and the salted password must not be empty".into(),
            ));
        }
        let iterations = u32::try_from(u.iterations).unwrap_or(u32::MAX);
        let credential =
            ScramCredential::from_salted(hash, &u.salt, iterations, &u.salted_password);
        changes.push(Change::Upsert(user.to_string(), credential));
    }
    Ok(changes)
}

async fn alter(
    call: &Call<'_>,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // One result per user, in the order users first appear (Kafka's answer).
    let mut users: Vec<String> = Vec::new();
    for name in request
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(request.upsertions.iter().map(|u| &u.name))
    {
        if !users.iter().any(|u| u == name.as_str()) {
            users.push(name.to_string());
        }
    }
    let result = |user: &str, error: Option<(i16, String)>| {
        let r = AlterUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user.to_string()));
        match error {
            None => r,
            Some((code, text)) => r.with_error_code(code).with_error_message(message(text)),
        }
    };
    let refuse_all = |code: i16, text: &str| {
        AlterUserScramCredentialsResponse::default().with_results(
            users
                .iter()
                .map(|u| result(u, Some((code, text.to_string()))))
                .collect(),
        )
    };
    if !call.may_cluster(Operation::Alter) {
        return refuse_all(
            codes::CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.",
        );
    }
    let known = call.context.scram_users.describe();
    let checked: Vec<(String, Result<Vec<Change>, Refusal>)> = users
        .iter()
        .map(|user| {
            let deletions: Vec<_> = request
                .deletions
                .iter()
                .filter(|d| d.name.as_str() == user)
                .collect();
            let upsertions: Vec<_> = request
                .upsertions
                .iter()
                .filter(|u| u.name.as_str() == user)
                .collect();
            (
                user.clone(),
                check_user(user, &deletions, &upsertions, known.get(user)),
            )
        })
        .collect();
    let changes: Vec<Change> = checked
        .iter()
        .filter_map(|(_, c)| c.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    let written = if changes.is_empty() {
        Ok(())
    } else {
        call.context.scram_users.alter(changes).await
    };
    if let Err(e) = &written {
        tracing::error!(error = %e, "AlterUserScramCredentials: the credentials could not be written; nothing changed");
    }
    let results = checked
        .into_iter()
        .map(|(user, outcome)| match (outcome, &written) {
            (Err(refused), _) => result(&user, Some(refused)),
            (Ok(_), Err(e)) => result(&user, Some((codes::UNKNOWN_SERVER_ERROR, e.clone()))),
            (Ok(_), Ok(())) => {
                tracing::info!(user, "SCRAM credentials altered");
                result(&user, None)
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

pub(crate) struct DescribeUserScramCredentials;

impl Api for DescribeUserScramCredentials {
    const KEY: ApiKey = ApiKey::DescribeUserScramCredentials;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = DescribeUserScramCredentialsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeUserScramCredentialsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeUserScramCredentialsResponse> {
        Some(describe(call, &request))
    }
}

pub(crate) struct AlterUserScramCredentials;

impl Api for AlterUserScramCredentials {
    const KEY: ApiKey = ApiKey::AlterUserScramCredentials;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Request = AlterUserScramCredentialsRequest;

    async fn handle(
        call: &Call<'_>,
        request: AlterUserScramCredentialsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<AlterUserScramCredentialsResponse> {
        Some(alter(call, request).await)
    }
}
