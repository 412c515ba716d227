//! Server logic against the fake provider.
