//! The property tests over decoding and validation.
