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

/// Two processes appending to one document through `update` at once: every append is kept
/// (a read-then-replace would lose some), a refusal writes nothing.
#[tokio::test]
async fn concurrent_updates_never_lose_a_change() {
    let Some(pg) = server().await else { return };
    let url = bounded("create database", pg.create_database("doc_updates"))
        .await
        .expect("database");
    let a = bounded("connect", PostgresDocuments::connect(&url, 4))
        .await
        .expect("connect");
    let b = bounded("connect", PostgresDocuments::connect(&url, 4))
        .await
        .expect("connect");
    async fn append(docs: &PostgresDocuments, item: String) {
        let done = docs
            .update("list", |body| {
                let mut body = body.unwrap_or_default();
                body.extend_from_slice(item.as_bytes());
                body.push(b'\n');
                Ok::<_, String>(Some(body))
            })
            .await
            .expect("the database");
        done.expect("nothing refused");
    }
    let (a, b) = (std::sync::Arc::new(a), std::sync::Arc::new(b));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let docs = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            append(&docs, format!("item-{i}")).await
        }));
    }
    for task in tasks {
        bounded("update", task).await.expect("the task");
    }
    let body = bounded("load", a.load("list")).await.unwrap().unwrap();
    let mut items: Vec<&str> = std::str::from_utf8(&body).unwrap().lines().collect();
    items.sort_unstable();
    let mut want: Vec<String> = (0..40).map(|i| format!("item-{i}")).collect();
    want.sort_unstable();
    assert_eq!(items, want);
    // A refusal and a "no change" write nothing.
    let refused = bounded(
        "update",
        a.update("list", |_| Err::<Option<Vec<u8>>, _>("no")),
    )
    .await
    .unwrap();
    assert_eq!(refused, Err("no"));
    bounded("update", a.update("list", |_| Ok::<_, String>(None)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        bounded("load", b.load("list")).await.unwrap().unwrap(),
        body
    );
}
