'use strict';
// claimd for Node.js in this example: the installable package `@claimd/client`
// (clients/node in this repository), re-exported under the name the example's code and
// docs have always used. package.json depends on it as `file:../../clients/node`, and
// `.npmrc` (install-links) makes `npm ci` install a copy of it with its dependencies, as a
// release would be installed.
//
//   const { Claims, PermanentError, fingerprintOf } = require('./claimd');
//
// is the same as `require('@claimd/client')`; a service of your own depends on the
// package instead (clients/node/README.md). Everything — `run`, the low-level calls,
// `waitMs`, `ClaimdError` with the BadRequest field — is documented there.

/** The package's exports, unchanged: `Claims`, `ClaimdError`, `PermanentError`, `Decision`, … */
module.exports = require('@claimd/client');
