//! Connecting to a real nats-server: typed errors at start, authentication, and the state
//! events of a connection whose server goes away and comes back.

mod common;

use std::time::{Duration, Instant};

use common::{nats, wait_until_async};
use sluice_cluster::testing::NatsServer;
use sluice_cluster::{ClusterConfig, ConnectError, ConnectionEvent, ConnectionState, connect};

fn unused_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn unreachable_nats_at_start_is_a_typed_error_not_a_hang() {
    let url = format!("nats://127.0.0.1:{}", unused_port());
    let start = Instant::now();
    let err = connect(&ClusterConfig::new(&url)).await.unwrap_err();
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains(&url), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_server_that_never_answers_fails_within_connect_timeout() {
    // Accepts TCP (the kernel's backlog) but never sends INFO.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("nats://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let config = ClusterConfig::builder(&url)
        .connect_timeout_ms(300)
        .build()
        .unwrap();
    let start = Instant::now();
    let err = connect(&config).await.unwrap_err();
    assert!(
        matches!(
            err,
            ConnectError::Timeout { .. } | ConnectError::Unreachable { .. }
        ),
        "{err:?}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(1_300),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn an_invalid_config_is_refused_before_connecting() {
    let err = connect(&ClusterConfig::new("http://x")).await.unwrap_err();
    assert!(matches!(err, ConnectError::Config(_)), "{err:?}");
}

#[tokio::test]
async fn user_and_password_from_config_reach_a_server_that_requires_them() {
    let server = NatsServer::start_with("authorization { user: sluice, password: s3cret }")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ok = ClusterConfig::builder(server.url())
        .user_password("sluice", "s3cret")
        .build()
        .unwrap();
    let conn = connect(&ok).await.unwrap();
    assert_eq!(*conn.state().borrow(), ConnectionState::Connected);
    conn.client().flush().await.unwrap();

    let wrong = ClusterConfig::builder(server.url())
        .user_password("sluice", "nope")
        .build()
        .unwrap();
    let err = connect(&wrong).await.unwrap_err();
    assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().to_lowercase().contains("author"), "{err}");
}

#[tokio::test]
async fn a_token_from_config_reaches_a_server_that_requires_it() {
    let server = NatsServer::start_with("authorization { token: t0ken }")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conn = connect(
        &ClusterConfig::builder(server.url())
            .token("t0ken")
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    conn.client().flush().await.unwrap();
    let none = connect(&ClusterConfig::new(server.url()))
        .await
        .unwrap_err();
    assert!(matches!(none, ConnectError::Unreachable { .. }), "{none:?}");
}

#[tokio::test]
async fn a_missing_credentials_file_names_the_file() {
    let server = nats().await;
    let config = ClusterConfig::builder(server.url())
        .credentials_file("/nonexistent/host.creds")
        .build()
        .unwrap();
    let err = connect(&config).await.unwrap_err();
    assert!(matches!(err, ConnectError::File { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/host.creds"), "{err}");
}

#[tokio::test]
async fn state_and_events_follow_the_server_going_away_and_coming_back() {
    let mut server = nats().await;
    let conn = connect(&ClusterConfig::new(server.url())).await.unwrap();
    assert_eq!(conn.server_max_payload(), 8 * 1024 * 1024);
    assert!(
        conn.server_version().starts_with("2."),
        "{}",
        conn.server_version()
    );
    let mut events = conn.events();
    let state = conn.state();

    server.kill();
    wait_until_async(Duration::from_secs(10), "disconnected state", || {
        let s = *state.borrow();
        async move { s == ConnectionState::Disconnected }
    })
    .await;
    // The initial Connected may still be in flight; the disconnection must follow.
    loop {
        match events.recv().await.unwrap() {
            ConnectionEvent::Disconnected => break,
            ConnectionEvent::Connected => {}
            other => panic!("unexpected event {other:?}"),
        }
    }

    server.restart().await.unwrap();
    wait_until_async(Duration::from_secs(20), "reconnected state", || {
        let s = *state.borrow();
        async move { s == ConnectionState::Connected }
    })
    .await;
    let mut saw_connected = false;
    while let Ok(e) = events.try_recv() {
        saw_connected |= e == ConnectionEvent::Connected;
    }
    assert!(saw_connected);
    // The connection works again: a round trip through the server.
    conn.client().flush().await.unwrap();
}
