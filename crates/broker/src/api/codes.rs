//! Kafka's numeric error codes the broker sends (`org.apache.kafka.common.protocol.Errors`).

#![allow(missing_docs, dead_code)] // the table of codes, not all sent yet

pub(crate) const NONE: i16 = 0;
pub(crate) const OFFSET_OUT_OF_RANGE: i16 = 1;
pub(crate) const CORRUPT_MESSAGE: i16 = 2;
pub(crate) const MESSAGE_TOO_LARGE: i16 = 10;
pub(crate) const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub(crate) const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub(crate) const NOT_COORDINATOR: i16 = 16;
pub(crate) const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub(crate) const ILLEGAL_GENERATION: i16 = 22;
pub(crate) const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub(crate) const INVALID_GROUP_ID: i16 = 24;
pub(crate) const UNKNOWN_MEMBER_ID: i16 = 25;
pub(crate) const REBALANCE_IN_PROGRESS: i16 = 27;
pub(crate) const UNSUPPORTED_VERSION: i16 = 35;
pub(crate) const TOPIC_ALREADY_EXISTS: i16 = 36;
pub(crate) const INVALID_PARTITIONS: i16 = 37;
pub(crate) const INVALID_REPLICATION_FACTOR: i16 = 38;
pub(crate) const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub(crate) const INVALID_CONFIG: i16 = 40;
pub(crate) const INVALID_REQUEST: i16 = 42;
pub(crate) const KAFKA_STORAGE_ERROR: i16 = 56;
pub(crate) const LOG_DIR_NOT_FOUND: i16 = 57;
pub(crate) const ELECTION_NOT_NEEDED: i16 = 84;
pub(crate) const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
pub(crate) const UNKNOWN_SERVER_ERROR: i16 = -1;
pub(crate) const GROUP_ID_NOT_FOUND: i16 = 69;
pub(crate) const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
pub(crate) const NON_EMPTY_GROUP: i16 = 68;
pub(crate) const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub(crate) const MEMBER_ID_REQUIRED: i16 = 79;
pub(crate) const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub(crate) const UNKNOWN_TOPIC_ID: i16 = 100;
pub(crate) const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub(crate) const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
pub(crate) const INVALID_PRODUCER_EPOCH: i16 = 47;
pub(crate) const INVALID_TXN_STATE: i16 = 48;
pub(crate) const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
pub(crate) const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub(crate) const UNKNOWN_PRODUCER_ID: i16 = 59;
pub(crate) const INVALID_RECORD: i16 = 87;
pub(crate) const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
