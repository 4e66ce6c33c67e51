//! Hostile request bodies and a connection flood.
