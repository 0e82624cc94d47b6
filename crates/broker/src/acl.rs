//! Kafka's ACLs (`--authorizer`): bindings of a resource pattern to a principal, host,
//! operation and permission, and the authorizer that judges a request by them, with the rules
//! of Kafka's `StandardAuthorizer`:
//!
//! - super users (`--super-users`) may do anything;
//! - an ACL matches a resource when the resource types are equal and its pattern is LITERAL
//!   with the resource's name (or the wildcard `*`) or PREFIXED with a prefix of it; it
//!   applies to a request when its principal is the request's (or `User:*`) and its host the
//!   client's address (or `*`);
//! - a matching DENY for the operation (or ALL) refuses, whatever allows it;
//! - else a matching ALLOW for the operation, for ALL, or for an operation that implies it
//!   (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS)
//!   permits;
//! - else, when no ACL at all matches the resource, `--allow-everyone-if-no-acl-found`
//!   decides (default: refused).
//!
//! The bindings are kept in `<data-dir>/acls.json` (written whole to a temporary file,
//! synced, renamed over the old one: a failed write changes nothing), or in memory without a
//! data directory.

use std::net::IpAddr;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::api::codes::INVALID_REQUEST;
use crate::documents::Documents;
use crate::error::BrokerError;

/// The file of a data directory holding the ACLs.
pub(crate) const ACLS_FILE: &str = "acls.json";

/// Kafka's resource types (`ResourceType`), the three this broker enforces, with their codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum ResourceType {
    Topic,
    Group,
    Cluster,
}

impl ResourceType {
    pub(crate) fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
        }
    }

    fn from_code(code: i8) -> Option<ResourceType> {
        match code {
            2 => Some(ResourceType::Topic),
            3 => Some(ResourceType::Group),
            4 => Some(ResourceType::Cluster),
            _ => None,
        }
    }
}

/// The one name of the cluster resource (Kafka's `kafka-cluster`).
pub(crate) const CLUSTER_NAME: &str = "kafka-cluster";

/// Kafka's pattern types an ACL can have (`PatternType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub(crate) fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

/// Kafka's operations (`AclOperation`), with their codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
}

impl Operation {
    const ALL_OPS: [Operation; 11] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
    ];

    pub(crate) fn code(self) -> i8 {
        match self {
            Operation::All => 2,
            Operation::Read => 3,
            Operation::Write => 4,
            Operation::Create => 5,
            Operation::Delete => 6,
            Operation::Alter => 7,
            Operation::Describe => 8,
            Operation::ClusterAction => 9,
            Operation::DescribeConfigs => 10,
            Operation::AlterConfigs => 11,
            Operation::IdempotentWrite => 12,
        }
    }

    fn from_code(code: i8) -> Option<Operation> {
        Operation::ALL_OPS.into_iter().find(|o| o.code() == code)
    }

    /// Whether an ALLOW of `self` permits `asked`.
    fn allows(self, asked: Operation) -> bool {
        self == asked
            || self == Operation::All
            || (asked == Operation::Describe
                && matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ))
            || (asked == Operation::DescribeConfigs && self == Operation::AlterConfigs)
    }
}

/// ALLOW or DENY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub(crate) fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }
}

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct Acl {
    pub(crate) resource_type: ResourceType,
    pub(crate) name: String,
    pub(crate) pattern: PatternType,
    /// `Type:name`, e.g. `User:alice`, or `User:*`.
    pub(crate) principal: String,
    /// The client's address, or `*`.
    pub(crate) host: String,
    pub(crate) operation: Operation,
    pub(crate) permission: Permission,
}

/// Why an ACL (or a filter) of a request is refused: Kafka's code and message.
pub(crate) type Refused = (i16, String);

/// A malformed ACL or filter: INVALID_REQUEST, as Kafka answers.
fn invalid(message: impl Into<String>) -> Refused {
    (INVALID_REQUEST, message.into())
}

/// The fields of a CreateAcls creation (or of a filter), as they come on the wire.
#[derive(Clone, Debug, Default)]
pub(crate) struct WireAcl {
    pub(crate) resource_type: i8,
    pub(crate) name: Option<String>,
    pub(crate) pattern: i8,
    pub(crate) principal: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) operation: i8,
    pub(crate) permission: i8,
}

/// Kafka's codes of the wildcards filters use.
const ANY: i8 = 1;
const MATCH: i8 = 2;

impl Acl {
    /// A new ACL from a CreateAcls creation, with Kafka's validation
    /// (`AclControlManager.validateNewAcl`); resource types this broker does not enforce
    /// (TRANSACTIONAL_ID, DELEGATION_TOKEN, USER) are refused rather than kept unenforced.
    pub(crate) fn from_wire(w: &WireAcl) -> Result<Acl, Refused> {
        let resource_type = match w.resource_type {
            5..=7 => {
                return Err(invalid(format!(
                "resource type {} is not enforced by this broker (TOPIC, GROUP and CLUSTER are)",
                w.resource_type
            )))
            }
            code => ResourceType::from_code(code)
                .ok_or_else(|| invalid(format!("Invalid resourceType {code}")))?,
        };
        let pattern = match w.pattern {
            3 => PatternType::Literal,
            4 => PatternType::Prefixed,
            code => {
                return Err(invalid(format!(
                    "Invalid patternType {code}: an ACL's pattern is LITERAL (3) or PREFIXED (4)"
                )))
            }
        };
        let name = w.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(invalid("Resource name should not be empty"));
        }
        if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
            return Err(invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )));
        }
        let principal = w.principal.clone().unwrap_or_default();
        match principal.split_once(':') {
            Some((kind, who)) if !kind.is_empty() && !who.is_empty() => {}
            _ => {
                return Err(invalid(format!(
                    "Could not parse principal from `{principal}` (no colon is found \
                     separating the principal type from the principal name)"
                )))
            }
        }
        let host = w.host.clone().unwrap_or_default();
        if host.is_empty() || (host != "*" && host.parse::<IpAddr>().is_err()) {
            return Err(invalid(format!(
                "Invalid host `{host}`: an IP address or `*`"
            )));
        }
        let operation = Operation::from_code(w.operation)
            .ok_or_else(|| invalid(format!("Invalid operation {}", w.operation)))?;
        let permission = match w.permission {
            2 => Permission::Deny,
            3 => Permission::Allow,
            code => return Err(invalid(format!("Invalid permissionType {code}"))),
        };
        Ok(Acl {
            resource_type,
            name,
            pattern,
            principal,
            host,
            operation,
            permission,
        })
    }

    /// Whether this ACL's pattern covers the resource `(kind, name)`.
    fn covers(&self, kind: ResourceType, name: &str) -> bool {
        self.resource_type == kind
            && match self.pattern {
                PatternType::Literal => self.name == name || self.name == "*",
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }
}

/// A DescribeAcls or DeleteAcls filter (Kafka's `AclBindingFilter`).
#[derive(Clone, Debug)]
pub(crate) struct Filter(WireAcl);

impl Filter {
    /// Checks the filter's codes (unknown codes are INVALID_REQUEST, as Kafka answers them).
    pub(crate) fn from_wire(w: WireAcl) -> Result<Filter, Refused> {
        if !(w.resource_type == ANY || (2..=7).contains(&w.resource_type)) {
            return Err(invalid(format!("Invalid resourceType {}", w.resource_type)));
        }
        if !(ANY..=4).contains(&w.pattern) {
            return Err(invalid(format!("Invalid patternType {}", w.pattern)));
        }
        if !(w.operation == ANY || Operation::from_code(w.operation).is_some()) {
            return Err(invalid(format!("Invalid operation {}", w.operation)));
        }
        if !(ANY..=3).contains(&w.permission) {
            return Err(invalid(format!("Invalid permissionType {}", w.permission)));
        }
        Ok(Filter(w))
    }

    pub(crate) fn matches(&self, acl: &Acl) -> bool {
        let f = &self.0;
        let kind = f.resource_type == ANY || f.resource_type == acl.resource_type.code();
        let pattern = match (f.pattern, &f.name) {
            (ANY, None) => true,
            (ANY, Some(name)) => &acl.name == name,
            // MATCH: every ACL that applies to the named resource (literal, wildcard, prefix)
            (MATCH, None) => true,
            (MATCH, Some(name)) => ResourceType::from_code(f.resource_type)
                .map_or(acl.name == *name, |kind| acl.covers(kind, name)),
            (code, name) => {
                acl.pattern.code() == code && name.as_ref().is_none_or(|n| &acl.name == n)
            }
        };
        kind && pattern
            && f.principal.as_ref().is_none_or(|p| &acl.principal == p)
            && f.host.as_ref().is_none_or(|h| &acl.host == h)
            && (f.operation == ANY || f.operation == acl.operation.code())
            && (f.permission == ANY || f.permission == acl.permission.code())
    }
}

/// The authorizer: the ACLs, the super users, and where the ACLs are kept.
#[derive(Debug)]
pub(crate) struct Authorizer {
    acls: RwLock<Arc<Vec<Acl>>>,
    /// Serializes the writers (CreateAcls, DeleteAcls): read, write the file, swap.
    write: tokio::sync::Mutex<()>,
    super_users: Vec<String>,
    allow_if_no_acl: bool,
    /// Where the ACLs are kept (none: in memory only).
    documents: Option<Documents>,
}

#[derive(Serialize, Deserialize)]
struct AclsFile {
    version: u32,
    acls: Vec<Acl>,
}

/// The ACLs of a kept ACL document (none without one).
fn parse_acls(bytes: Option<&[u8]>) -> Result<Vec<Acl>, String> {
    let Some(bytes) = bytes else {
        return Ok(Vec::new());
    };
    let file: AclsFile = serde_json::from_slice(bytes)
        .map_err(|e| format!("not an ACL file of this broker: {e}"))?;
    if file.version != 1 {
        return Err(format!(
            "ACL file version {} is not known to this broker (1 is)",
            file.version
        ));
    }
    Ok(file.acls)
}

impl Authorizer {
    /// The authorizer, with the ACLs `documents` keep (`acls.json`), if any.
    ///
    /// # Errors
    /// `INVALID_CONFIG` (setting `authorizer`) if the document cannot be read or parsed: a
    /// broker does not start with ACLs it cannot read.
    pub(crate) async fn open(
        documents: Option<Documents>,
        super_users: Vec<String>,
        allow_if_no_acl: bool,
    ) -> Result<Authorizer, BrokerError> {
        let acls = match &documents {
            Some(documents) => {
                let shown = documents.shown(ACLS_FILE);
                let refuse = |reason: String| BrokerError::InvalidConfig {
                    setting: "authorizer",
                    reason: format!("`{shown}`: {reason}"),
                };
                let bytes = documents
                    .load(ACLS_FILE)
                    .await
                    .map_err(|e| refuse(format!("cannot read the ACLs: {e}")))?;
                parse_acls(bytes.as_deref()).map_err(refuse)?
            }
            None => Vec::new(),
        };
        Ok(Authorizer {
            acls: RwLock::new(Arc::new(acls)),
            write: tokio::sync::Mutex::new(()),
            super_users,
            allow_if_no_acl,
            documents,
        })
    }

    /// The ACLs now.
    pub(crate) fn acls(&self) -> Arc<Vec<Acl>> {
        self.acls
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether `principal` from `host` may do `operation` on the resource `(kind, name)`.
    pub(crate) fn authorize(
        &self,
        principal: &str,
        host: IpAddr,
        operation: Operation,
        kind: ResourceType,
        name: &str,
    ) -> bool {
        if self.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let acls = self.acls();
        let host = host.to_string();
        let mut any = false;
        let mut allowed = false;
        for acl in acls.iter().filter(|a| a.covers(kind, name)) {
            any = true;
            let applies = (acl.principal == principal || acl.principal == "User:*")
                && (acl.host == "*" || acl.host == host);
            if !applies {
                continue;
            }
            match acl.permission {
                Permission::Deny
                    if acl.operation == operation || acl.operation == Operation::All =>
                {
                    return false
                }
                Permission::Allow if acl.operation.allows(operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!any && self.allow_if_no_acl)
    }

    /// Applies `change` to the ACLs (under the writers' lock), writes the result to the data
    /// directory, and only then makes it the ACLs in force. Returns `change`'s answer.
    ///
    /// # Errors
    /// The write's error, with the ACLs unchanged.
    pub(crate) async fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<Acl>) -> T,
    ) -> Result<T, String> {
        let _writer = self.write.lock().await;
        let Some(documents) = &self.documents else {
            let mut next = (*self.acls()).clone();
            let answer = change(&mut next);
            next.sort();
            next.dedup();
            self.swap(next);
            return Ok(answer);
        };
        // The ACLs as kept (another broker over the same database may have changed them),
        // changed and written back in one step.
        let mut done = None;
        documents
            .update(ACLS_FILE, false, |bytes| {
                let mut next = parse_acls(bytes.as_deref())?;
                let answer = change(&mut next);
                next.sort();
                next.dedup();
                let file = AclsFile {
                    version: 1,
                    acls: next,
                };
                let bytes = serde_json::to_vec_pretty(&file)
                    .map_err(|e| format!("encoding the ACLs: {e}"))?;
                done = Some((answer, file.acls));
                Ok(Some(bytes))
            })
            .await?;
        let (answer, next) = done.ok_or("the ACLs were not changed")?;
        self.swap(next);
        Ok(answer)
    }

    /// Reads the kept ACLs again (several brokers over one database: another one may have
    /// changed them), keeping those in force if they cannot be read.
    pub(crate) async fn refresh(&self) {
        let Some(documents) = self.documents.as_ref().filter(|d| d.is_shared()) else {
            return;
        };
        let _writer = self.write.lock().await;
        match documents
            .load(ACLS_FILE)
            .await
            .and_then(|b| parse_acls(b.as_deref()))
        {
            Ok(acls) if *self.acls() != acls => self.swap(acls),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the ACLs again; those in force stay"),
        }
    }

    fn swap(&self, acls: Vec<Acl>) {
        *self
            .acls
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(acls);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        kind: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> Acl {
        Acl {
            resource_type: kind,
            name: name.into(),
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn authorizer(acls: Vec<Acl>, allow_if_no_acl: bool) -> Authorizer {
        Authorizer {
            acls: RwLock::new(Arc::new(acls)),
            write: tokio::sync::Mutex::new(()),
            super_users: vec!["User:admin".into()],
            allow_if_no_acl,
            documents: None,
        }
    }

    const HOST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn deny_wins_prefix_and_wildcard_match_and_read_implies_describe() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let a = authorizer(
            vec![
                acl(Group, "orders-", Prefixed, "User:alice", Read, Allow),
                acl(Group, "orders-secret", Literal, "User:alice", All, Deny),
                acl(Topic, "*", Literal, "User:*", Describe, Allow),
                acl(Topic, "payments", Literal, "User:bob", Write, Allow),
            ],
            false,
        );
        assert!(a.authorize("User:alice", HOST, Read, Group, "orders-eu"));
        assert!(
            a.authorize("User:alice", HOST, Describe, Group, "orders-eu"),
            "READ implies DESCRIBE"
        );
        assert!(!a.authorize("User:alice", HOST, Delete, Group, "orders-eu"));
        assert!(
            !a.authorize("User:alice", HOST, Read, Group, "orders-secret"),
            "DENY wins"
        );
        assert!(!a.authorize("User:bob", HOST, Read, Group, "orders-eu"));
        assert!(
            a.authorize("User:bob", HOST, Describe, Topic, "anything"),
            "wildcard"
        );
        assert!(a.authorize("User:bob", HOST, Write, Topic, "payments"));
        assert!(
            !a.authorize("User:bob", HOST, Read, Topic, "payments"),
            "WRITE does not imply READ"
        );
        assert!(
            a.authorize("User:admin", HOST, Delete, Cluster, CLUSTER_NAME),
            "super user"
        );
        // no ACL on the resource at all: the default decides
        assert!(!a.authorize("User:bob", HOST, Read, Group, "unrelated"));
        let open = authorizer(
            vec![acl(Group, "g", Literal, "User:alice", Read, Allow)],
            true,
        );
        assert!(open.authorize("User:bob", HOST, Read, Group, "unrelated"));
        assert!(
            !open.authorize("User:bob", HOST, Read, Group, "g"),
            "an ACL exists for g"
        );
    }

    #[test]
    fn a_host_restricts_an_acl_to_that_client_address() {
        let mut only = acl(
            ResourceType::Group,
            "g",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        only.host = "10.0.0.7".into();
        let a = authorizer(vec![only], false);
        assert!(a.authorize(
            "User:alice",
            "10.0.0.7".parse().unwrap(),
            Operation::Read,
            ResourceType::Group,
            "g"
        ));
        assert!(!a.authorize(
            "User:alice",
            HOST,
            Operation::Read,
            ResourceType::Group,
            "g"
        ));
    }

    #[test]
    fn invalid_acls_are_refused_with_kafkas_messages() {
        let good = WireAcl {
            resource_type: 3,
            name: Some("g".into()),
            pattern: 3,
            principal: Some("User:alice".into()),
            host: Some("*".into()),
            operation: 3,
            permission: 3,
        };
        assert!(Acl::from_wire(&good).is_ok());
        for (bad, says) in [
            (
                WireAcl {
                    resource_type: 1,
                    ..good.clone()
                },
                "Invalid resourceType",
            ),
            (
                WireAcl {
                    resource_type: 5,
                    ..good.clone()
                },
                "not enforced",
            ),
            (
                WireAcl {
                    pattern: 2,
                    ..good.clone()
                },
                "Invalid patternType",
            ),
            (
                WireAcl {
                    name: Some(String::new()),
                    ..good.clone()
                },
                "should not be empty",
            ),
            (
                WireAcl {
                    resource_type: 4,
                    ..good.clone()
                },
                "kafka-cluster",
            ),
            (
                WireAcl {
                    principal: Some("alice".into()),
                    ..good.clone()
                },
                "Could not parse principal",
            ),
            (
                WireAcl {
                    host: Some("example.com".into()),
                    ..good.clone()
                },
                "Invalid host",
            ),
            (
                WireAcl {
                    operation: 1,
                    ..good.clone()
                },
                "Invalid operation",
            ),
            (
                WireAcl {
                    permission: 1,
                    ..good.clone()
                },
                "Invalid permissionType",
            ),
        ] {
            let (code, message) = Acl::from_wire(&bad).unwrap_err();
            assert_eq!(code, INVALID_REQUEST);
            assert!(message.contains(says), "{message}");
        }
    }

    fn filter(kind: i8, name: Option<&str>, pattern: i8, permission: i8) -> Filter {
        Filter::from_wire(WireAcl {
            resource_type: kind,
            name: name.map(Into::into),
            pattern,
            operation: 1,
            permission,
            ..WireAcl::default()
        })
        .unwrap()
    }

    #[test]
    fn filters_match_as_kafkas_binding_filters() {
        let prefixed = acl(
            ResourceType::Group,
            "orders-",
            PatternType::Prefixed,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        let literal = acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:bob",
            Operation::Write,
            Permission::Deny,
        );
        let any = filter(1, None, 1, 1);
        assert!(any.matches(&prefixed) && any.matches(&literal));
        let by_match = filter(3, Some("orders-eu"), 2, 1);
        assert!(by_match.matches(&prefixed) && !by_match.matches(&literal));
        let exact = filter(3, Some("orders-eu"), 4, 1);
        assert!(
            !exact.matches(&prefixed),
            "PREFIXED filter names the pattern, not a resource"
        );
        let deny = Filter::from_wire(WireAcl {
            resource_type: 1,
            pattern: 1,
            operation: 1,
            permission: 2,
            principal: Some("User:bob".into()),
            ..WireAcl::default()
        })
        .unwrap();
        assert!(deny.matches(&literal) && !deny.matches(&prefixed));
        assert!(Filter::from_wire(WireAcl {
            resource_type: 9,
            pattern: 1,
            operation: 1,
            permission: 1,
            ..WireAcl::default()
        })
        .is_err());
    }

    #[tokio::test]
    async fn acls_persist_in_the_data_directory_and_a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let docs = |d: &std::path::Path| Some(Documents::Dir(d.to_path_buf()));
        let a = Authorizer::open(docs(dir.path()), Vec::new(), false)
            .await
            .unwrap();
        let g = acl(
            ResourceType::Group,
            "g",
            PatternType::Literal,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        a.update(|acls| acls.push(g.clone())).await.unwrap();
        let reopened = Authorizer::open(docs(dir.path()), Vec::new(), false)
            .await
            .unwrap();
        assert_eq!(*reopened.acls(), vec![g.clone()]);
        // the directory is gone: the write fails and the ACLs in force stay as they were
        let gone = dir.path().join("gone");
        let b = Authorizer::open(docs(&gone), Vec::new(), false)
            .await
            .unwrap();
        assert!(b.update(|acls| acls.push(g.clone())).await.is_err());
        assert!(b.acls().is_empty());
        std::fs::write(dir.path().join(ACLS_FILE), "{not json").unwrap();
        let err = Authorizer::open(docs(dir.path()), Vec::new(), false)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "INVALID_CONFIG");
    }
}
