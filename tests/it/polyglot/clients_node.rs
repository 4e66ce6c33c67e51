//! The installable Node package (`clients/node`) against the real claimd: `npm pack`, the
//! tarball installed into an empty directory, its own `node --test` suite and a typed usage
//! file checked with `tsc --noEmit`.
