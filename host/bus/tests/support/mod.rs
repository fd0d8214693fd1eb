//! Shared helpers for the bus tests.
#![allow(dead_code)]

use sluice_bus::{BusConfig, DrrConfig, Event, EventBus};

pub fn bus_with_budget(budget_bytes: usize) -> EventBus {
    BusConfig {
        route: DrrConfig {
            budget_bytes,
            ..DrrConfig::default()
        },
        ..BusConfig::default()
    }
    .build()
}

/// An event whose cost is exactly `cost` bytes (topic "t" counts 1).
pub fn ev(principal: &str, cost: usize, tag: u8) -> Event {
    assert!(cost >= 2);
    let mut payload = vec![0u8; cost - 1];
    payload[0] = tag;
    Event::new("t", payload).with_principal(principal)
}

pub fn tag(e: &Event) -> u8 {
    e.payload[0]
}
