//! The coordinator reports joins, leaves, expiries, rebalances and rejected commits as
//! `tracing` events, and is silent when no subscriber is installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use common::*;
use coordinator_core::Generation;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records each event as `message key=value …`.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            self.0.push_str(&format!(" {}={value}", field.name()));
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        self.0.lock().unwrap().push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn membership_rebalances_and_rejections_are_traced() {
    let recorder = Recorder::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    tracing::subscriber::with_default(recorder.clone(), || {
        rt.block_on(async {
            let f = fixture();
            f.coordinator.join("g", "m1", &["orders"]).await.unwrap();
            f.coordinator.join("g", "m2", &["orders"]).await.unwrap();
            let stale = f
                .coordinator
                .commit("g", "m1", Generation::new(1), &offsets(&[("orders", 0, 1)]))
                .await;
            assert!(stale.is_err());
            f.coordinator.leave("g", "m2").await.unwrap();
            f.clock.advance(101);
            f.coordinator.expire_members().await;
        });
    });
    let lines = recorder.0.lock().unwrap().clone();
    let has = |needle: &[&str]| lines.iter().any(|l| needle.iter().all(|n| l.contains(n)));
    assert!(
        has(&["member joined", "member=m1", "generation=1"]),
        "{lines:#?}"
    );
    assert!(
        has(&["group rebalanced", "from=1", "to=2", "assigned=4"]),
        "{lines:#?}"
    );
    assert!(
        has(&["commit rejected", "code=ILLEGAL_GENERATION"]),
        "{lines:#?}"
    );
    assert!(has(&["member left", "member=m2"]), "{lines:#?}");
    assert!(has(&["member session expired", "member=m1"]), "{lines:#?}");
    assert!(
        has(&["group rebalanced", "to=4", "state=Empty"]),
        "{lines:#?}"
    );
}

/// `Coordinator::stats` counts what a front cannot see from outside: generations installed
/// (by kind), offsets committed, deleted and expired, members expired.
#[tokio::test]
async fn stats_count_rebalances_commits_deletions_and_expiries() {
    let f = fixture();
    let clock = f.clock.clone();
    let c = coordinator_core::Coordinator::builder(f.store.clone(), f.topics.clone(), f.assignor)
        .clock(Arc::new(clock.clone()))
        .session_timeout_ms(100)
        .offsets_retention_ms(1_000)
        .build()
        .unwrap();
    assert_eq!(c.stats(), coordinator_core::CoordinatorStats::default());
    c.join("g", "m1", &["orders"]).await.unwrap(); // generation 1
    c.join("g", "m2", &["orders"]).await.unwrap(); // 2
    let listed = c.list_groups().await;
    assert_eq!(listed.len(), 1);
    assert_eq!(c.member_count(&listed[0].group_id), Some(2), "{listed:?}");
    assert_eq!(c.member_count("nobody"), None);
    c.leave("g", "m2").await.unwrap(); // 3
    c.commit_direct("simple", &offsets(&[("orders", 0, 5), ("orders", 1, 7)]))
        .await
        .unwrap();
    let deleted = c
        .offsets()
        .delete("simple", &[tp("orders", 1)])
        .await
        .unwrap();
    assert!(deleted.iter().all(|(_, r)| r.is_ok()), "{deleted:?}");
    let s = c.stats();
    assert_eq!(s.classic_rebalances, 3, "{s:?}");
    assert_eq!(s.classic_completed_rebalances, 3, "{s:?}");
    assert_eq!(s.consumer_rebalances, 0, "{s:?}");
    assert_eq!(s.offset_commits, 2, "{s:?}");
    assert_eq!(s.offset_deletions, 1, "{s:?}");
    assert_eq!(s.offset_expirations, 0, "{s:?}");
    assert_eq!(s.member_expirations, 0, "{s:?}");
    // m1's session ends: a fourth generation; the simple group's last offset expires.
    clock.advance(101);
    assert_eq!(c.expire_members().await.len(), 1);
    clock.advance(2_000);
    c.expire_members().await;
    let s = c.stats();
    assert_eq!(s.member_expirations, 1, "{s:?}");
    assert_eq!(s.classic_rebalances, 4, "{s:?}");
    assert_eq!(s.offset_expirations, 1, "{s:?}");
}
