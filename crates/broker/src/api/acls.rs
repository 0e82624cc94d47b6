//! CreateAcls (30), DescribeAcls (29) and DeleteAcls (31): the ACLs of `--authorizer`, as
//! Kafka's `AclControlManager` answers them. Without `--authorizer` each answers
//! SECURITY_DISABLED (54), Kafka's "No Authorizer is configured". CreateAcls and DeleteAcls
//! need ALTER on the cluster, DescribeAcls DESCRIBE (CLUSTER_AUTHORIZATION_FAILED, 31).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::registry::Api;
use super::Call;
use crate::acl::{Acl, Filter, Operation, ResourceType, WireAcl, CLUSTER_NAME};
use crate::shutdown::Shutdown;

use super::codes::{CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED, UNKNOWN_SERVER_ERROR};

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// `Err` with the code and message every item is answered with, when the call may not go on.
fn admitted<'a>(
    call: &'a Call<'_>,
    operation: Operation,
) -> Result<&'a crate::acl::Authorizer, (i16, String)> {
    let Some(authorizer) = call.context.authorizer.as_deref() else {
        return Err((SECURITY_DISABLED, "No Authorizer is configured.".into()));
    };
    if !call.authorize(operation, ResourceType::Cluster, CLUSTER_NAME) {
        return Err((
            CLUSTER_AUTHORIZATION_FAILED,
            "Cluster authorization failed.".into(),
        ));
    }
    Ok(authorizer)
}

async fn create_acls(call: &Call<'_>, request: CreateAclsRequest) -> CreateAclsResponse {
    let result = |code: i16, message: Option<String>| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
    };
    let authorizer = match admitted(call, Operation::Alter) {
        Ok(a) => a,
        Err((code, message)) => {
            return CreateAclsResponse::default().with_results(
                request
                    .creations
                    .iter()
                    .map(|_| result(code, Some(message.clone())))
                    .collect(),
            )
        }
    };
    let parsed: Vec<Result<Acl, (i16, String)>> = request
        .creations
        .iter()
        .map(|c| {
            Acl::from_wire(&WireAcl {
                resource_type: c.resource_type,
                name: Some(c.resource_name.to_string()),
                pattern: c.resource_pattern_type,
                principal: Some(c.principal.to_string()),
                host: Some(c.host.to_string()),
                operation: c.operation,
                permission: c.permission_type,
            })
        })
        .collect();
    let valid: Vec<Acl> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().cloned())
        .collect();
    let written = if valid.is_empty() {
        Ok(())
    } else {
        authorizer.update(|acls| acls.extend(valid)).await
    };
    let results = parsed
        .into_iter()
        .map(|p| match (p, &written) {
            (Err((code, message)), _) => result(code, Some(message)),
            (Ok(_), Ok(())) => result(0, None),
            (Ok(_), Err(e)) => result(UNKNOWN_SERVER_ERROR, Some(e.clone())),
        })
        .collect();
    if let Err(e) = &written {
        tracing::error!(error = %e, "CreateAcls: the ACLs could not be written; nothing changed");
    }
    CreateAclsResponse::default().with_results(results)
}

fn filter_of(
    resource_type: i8,
    name: &Option<StrBytes>,
    pattern: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<Filter, (i16, String)> {
    Filter::from_wire(WireAcl {
        resource_type,
        name: name.as_ref().map(|s| s.to_string()),
        pattern,
        principal: principal.as_ref().map(|s| s.to_string()),
        host: host.as_ref().map(|s| s.to_string()),
        operation,
        permission,
    })
}

fn describe_acls(call: &Call<'_>, request: &DescribeAclsRequest) -> DescribeAclsResponse {
    let authorizer = match admitted(call, Operation::Describe) {
        Ok(a) => a,
        Err((code, message)) => {
            return DescribeAclsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
        }
    };
    let filter = match filter_of(
        request.resource_type_filter,
        &request.resource_name_filter,
        request.pattern_type_filter,
        &request.principal_filter,
        &request.host_filter,
        request.operation,
        request.permission_type,
    ) {
        Ok(f) => f,
        Err((code, message)) => {
            return DescribeAclsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
        }
    };
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in authorizer.acls().iter().filter(|a| filter.matches(a)) {
        by_resource
            .entry((
                acl.resource_type.code(),
                acl.name.clone(),
                acl.pattern.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(text(&acl.principal))
                    .with_host(text(&acl.host))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        by_resource
            .into_iter()
            .map(|((kind, name, pattern), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(kind)
                    .with_resource_name(StrBytes::from_string(name))
                    .with_pattern_type(pattern)
                    .with_acls(acls)
            })
            .collect(),
    )
}

fn matching(acl: &Acl) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(text(&acl.name))
        .with_pattern_type(acl.pattern.code())
        .with_principal(text(&acl.principal))
        .with_host(text(&acl.host))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
}

async fn delete_acls(call: &Call<'_>, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = |code: i16, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    let authorizer = match admitted(call, Operation::Alter) {
        Ok(a) => a,
        Err((code, message)) => {
            return DeleteAclsResponse::default().with_filter_results(
                request
                    .filters
                    .iter()
                    .map(|_| failed(code, message.clone()))
                    .collect(),
            )
        }
    };
    let filters: Vec<Result<Filter, (i16, String)>> = request
        .filters
        .iter()
        .map(|f| {
            filter_of(
                f.resource_type_filter,
                &f.resource_name_filter,
                f.pattern_type_filter,
                &f.principal_filter,
                &f.host_filter,
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    // Every filter's matches are taken from the ACLs before this request (an ACL two filters
    // match is listed under both), and removed in one write.
    let removed = authorizer
        .update(|acls| {
            let matched: Vec<Vec<Acl>> = filters
                .iter()
                .map(|f| match f {
                    Ok(f) => acls.iter().filter(|a| f.matches(a)).cloned().collect(),
                    Err(_) => Vec::new(),
                })
                .collect();
            acls.retain(|a| !filters.iter().flatten().any(|f| f.matches(a)));
            matched
        })
        .await;
    let results = match removed {
        Ok(matched) => filters
            .into_iter()
            .zip(matched)
            .map(|(f, acls)| match f {
                Err((code, message)) => failed(code, message),
                Ok(_) => DeleteAclsFilterResult::default()
                    .with_matching_acls(acls.iter().map(matching).collect()),
            })
            .collect(),
        Err(e) => {
            tracing::error!(error = %e, "DeleteAcls: the ACLs could not be written; nothing changed");
            filters
                .iter()
                .map(|_| failed(UNKNOWN_SERVER_ERROR, e.clone()))
                .collect()
        }
    };
    DeleteAclsResponse::default().with_filter_results(results)
}

pub(crate) struct CreateAcls;

impl Api for CreateAcls {
    const KEY: ApiKey = ApiKey::CreateAcls;
    /// Kafka 4 serves 1–3 (v0 had no pattern type).
    const VERSIONS: RangeInclusive<i16> = 1..=3;
    type Request = CreateAclsRequest;

    async fn handle(
        call: &Call<'_>,
        request: CreateAclsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<CreateAclsResponse> {
        Some(create_acls(call, request).await)
    }
}

pub(crate) struct DescribeAcls;

impl Api for DescribeAcls {
    const KEY: ApiKey = ApiKey::DescribeAcls;
    const VERSIONS: RangeInclusive<i16> = 1..=3;
    type Request = DescribeAclsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DescribeAclsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DescribeAclsResponse> {
        Some(describe_acls(call, &request))
    }
}

pub(crate) struct DeleteAcls;

impl Api for DeleteAcls {
    const KEY: ApiKey = ApiKey::DeleteAcls;
    const VERSIONS: RangeInclusive<i16> = 1..=3;
    type Request = DeleteAclsRequest;

    async fn handle(
        call: &Call<'_>,
        request: DeleteAclsRequest,
        _shutdown: &mut Shutdown,
    ) -> Option<DeleteAclsResponse> {
        Some(delete_acls(call, request).await)
    }
}
