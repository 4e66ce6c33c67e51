'use strict';
// Required first by this example's suites: fails them when the copy of @claimd/client that
// `npm ci` installed here (examples/node/node_modules, install-links in .npmrc) is not the
// package in clients/node as it is now. The copy goes stale when clients/node changes after
// `npm ci` (the polyglot tests install again only when package-lock.json changes), and a
// stale copy would test old code without a word.

const fs = require('node:fs');
const path = require('node:path');

/** The directory of the package in the checkout. */
const SOURCE = path.join(__dirname, '..', '..', '..', 'clients', 'node');
/** The directory of the installed copy. */
const INSTALLED = path.dirname(require.resolve('@claimd/client/package.json'));

/** Every file under `dir` but node_modules, as paths relative to `root`. */
function filesUnder(root, dir = root) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : filesUnder(root, full);
    return [path.relative(root, full)];
  });
}

/** The installed files (but the docs) that differ from the checkout's or are missing from it. */
function staleFiles() {
  return filesUnder(INSTALLED).filter((file) => {
    if (file.endsWith('.md')) return false;
    const source = path.join(SOURCE, file);
    return !fs.existsSync(source) || !fs.readFileSync(source).equals(fs.readFileSync(path.join(INSTALLED, file)));
  });
}

const stale = staleFiles();
if (stale.length > 0) {
  throw new Error(
    `node_modules/@claimd/client is older than clients/node (${stale.join(', ')} changed): ` +
      'run `npm ci` in examples/node',
  );
}

module.exports = { staleFiles };
