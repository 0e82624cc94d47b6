//! Documents (the broker's ACLs and SCRAM credentials): kept whole, replaced whole, seen by
//! every process on the database, a refused write changing nothing.

use crate::common::{bounded, server};
use store_postgres::{PostgresDocuments, MAX_DOCUMENT_BYTES};

#[tokio::test]
async fn documents_are_replaced_whole_and_shared_by_every_connection() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("documents"))
        .await
        .expect("database");
    let a = bounded("connect", PostgresDocuments::connect(&url, 2))
        .await
        .expect("connect");
    assert_eq!(bounded("load", a.load("acls.json")).await.unwrap(), None);
    bounded("replace", a.replace("acls.json", b"{\"v\":1}"))
        .await
        .unwrap();
    bounded("replace", a.replace("acls.json", b"{\"v\":2}"))
        .await
        .unwrap();
    // another process's connection sees the last one
    let b = bounded("connect", PostgresDocuments::connect(&url, 1))
        .await
        .expect("connect");
    assert_eq!(
        bounded("load", b.load("acls.json"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"{\"v\":2}"[..])
    );
    // refused before anything is written: the document stays as it was
    let huge = vec![b'x'; MAX_DOCUMENT_BYTES + 1];
    let err = bounded("replace", b.replace("acls.json", &huge))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is refused"), "{err}");
    assert!(bounded("replace", b.replace("", b"x")).await.is_err());
    assert_eq!(
        bounded("load", a.load("acls.json"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"{\"v\":2}"[..])
    );
    // the server gone: an Io error, not a panic
    a.close();
    assert!(bounded("load", a.load("acls.json")).await.is_err());
}
