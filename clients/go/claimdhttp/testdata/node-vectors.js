// Writes node-vectors.json: what the Node package's request-identity.js computes for these
// inputs, so the Go tests check byte compatibility. Run from claimdhttp:
//   node testdata/node-vectors.js > testdata/node-vectors.json
const ri = require('../../../node/lib/request-identity.js');
const inputs = [
  '{"b":1,"a":[1,2,{"d":true,"c":null}]}',
  ' { "z" : "x" , "a" : -0.5e+10 } ',
  '{"a":1,"a":2}',
  '{"\\u00e9":1,"e":2,"\\ud83d\\ude00":3,"\\uffff":4}',
  '"\\u0001\\b\\f\\n\\r\\t\\/\\"\\\\\\u2028 é 😀"',
  '"\\ud800 lone"',
  '[1.0, 1e5, 0, -0, 10E-2]',
  '{"a":01}',
  '{"a":1,}',
  '[1,]',
  'nul',
  '',
  '{}',
  '[]',
  '{"k":{}}',
  '\ufeff{"a":1}',
  '{"é":1,"e":2,"f":3,"\u00ff":4,"\u0100":5}',
  '"\\uD834\\uDD1E"',
  'true',
  '1 2',
  '{"a":"\u007f"}',
  '[[[[[[[[[[1]]]]]]]]]]',
];
const deep = '['.repeat(513) + ']'.repeat(513);
const ok = '['.repeat(512) + ']'.repeat(512);
inputs.push(deep, ok);
const out = inputs.map((s) => {
  const c = ri.canonicalJson(s);
  const fp = ri.requestFingerprint('POST', '/orders?dry=1', Buffer.from(s, 'utf8'), 'application/json; charset=utf-8').toString('hex');
  return [s, c, fp];
});
const extra = {
  raw: ri.requestFingerprint('PATCH', '/a/b', Buffer.from('{"b":1,"a":2}'), 'text/plain').toString('hex'),
  vnd: ri.requestFingerprint('POST', '/x', Buffer.from('{"b":1,"a":2}'), 'application/vnd.api+json').toString('hex'),
  empty: ri.requestFingerprint('POST', '/x', Buffer.alloc(0), 'application/json').toString('hex'),
  badutf8: ri.requestFingerprint('POST', '/x', Buffer.from([0x7b, 0xff, 0x7d]), 'application/json').toString('hex'),
  claimKeys: [['', 'k'], ['acme corp/ü', 'a b'], ["a-_.!~*'()z", 'x'], ['t', 'x'.repeat(600)]].map(([c, k]) => [c, k, ri.claimKey(c, k)]),
  keys: ['abc', ' abc', 'abc ', 'a b', '"a b"', '"say \\"hi\\""', '"unterminated', '"a"b', '"bad\\n"', '""', 'x'.repeat(255), 'x'.repeat(256), '"' + 'x'.repeat(255) + '"', 'tab\there', 'ключ'].map((k) => [k, ri.parseKey(k)]),
};
console.log(JSON.stringify({ vectors: out, extra }));
