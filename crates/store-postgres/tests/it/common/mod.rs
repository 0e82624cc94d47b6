//! What the integration tests share: a throwaway server, or a skip (a failure under CI).

#![allow(dead_code, clippy::panic, clippy::expect_used)]

use std::future::Future;
use std::time::Duration;

use store_postgres::harness::{HarnessError, TempPostgres};
use store_postgres::PostgresStore;

/// The bound on every wait of these tests.
pub(crate) const BOUND: Duration = Duration::from_secs(60);

/// A started server; `None` (after printing why) when PostgreSQL is not installed and the
/// `CI` variable is not set. Under CI a missing PostgreSQL fails the test.
pub(crate) async fn server() -> Option<TempPostgres> {
    match tokio::time::timeout(Duration::from_secs(180), TempPostgres::start()).await {
        Ok(Ok(pg)) => Some(pg),
        Ok(Err(HarnessError::NotInstalled(why))) => {
            if std::env::var_os("CI").is_some() {
                panic!("CI is set, so PostgreSQL must be installed for these tests: {why}");
            }
            eprintln!("skipping: {why}");
            None
        }
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the test PostgreSQL did not start within 180 s"),
    }
}

/// `fut`, bounded by [`BOUND`].
pub(crate) async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {BOUND:?}"))
}

/// A store over a new database `name` of `pg`.
pub(crate) async fn store(pg: &TempPostgres, name: &str) -> PostgresStore {
    let url = bounded("create database", pg.create_database(name))
        .await
        .expect("create the database");
    bounded("connect", PostgresStore::connect(&url, 4))
        .await
        .expect("connect a store")
}
