//! Shared test harness: a PostgreSQL server per test binary ([`pg`]) and a real claimd on
//! a real socket over a fresh database per test ([`app`]). Not every binary uses every part.
#![allow(dead_code)]

pub mod app;
pub mod pg;
