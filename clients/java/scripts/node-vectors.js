// Run from clients/java: node scripts/node-vectors.js > src/test/resources/node-vectors.tsv
// Prints the Node client's answers as test vectors for the Java filter: one per line,
// kind then base64 fields ("-" for null).
const ri = require('../../node/lib/request-identity.js');
const sr = require('../../node/lib/stored-response.js');
const b = (s) => (s === null || s === undefined ? '-' : Buffer.from(s).toString('base64'));
const lines = [];
for (const t of [
  '{"b":1,"a":[true,false,null,{"z":"\\u00e9","y":1.50e+3}]}',
  ' { "a" : "x\\/y\\u0001\\ud800" , "a" : 2 , "\\u00e9":3, "é":4, "😀":5, "ﬀ":6 } ',
  '{"lone":"\\udc00x\\ud83d\\ude00","ctl":"\\u001f\\u007f"}',
  '[1, 2 ,3]', '{}', '[]', '"just a string"', '-0.0e-0', '01', '{"a":1,}', '[1,]', 'nul', '{"a" 1}',
  '\ufeff{"a":1}', '{"\\u2028":"\u2028"}', '{"tab":"\\t\\b\\f\\n\\r\\"\\\\"}', '[' .repeat(600) + ']'.repeat(600),
  '{"\\uD83D\\uDE00":1,"\\uFFFF":2,"\\uE000":3}', '1 2', '  true  ', '"\\x"', '"a\tb"',
]) lines.push(['canonical', b(t), b(ri.canonicalJson(t))].join('\t'));
for (const k of ['abc', '"abc"', '"a\\"b\\\\c"', '"a\\b"', '"abc', '"abc"x', ' abc', 'abc ', 'a b',
  '', '""', 'x'.repeat(255), 'x'.repeat(256), '"' + 'y'.repeat(255) + '"', 'é', '"é"', 'a\tb', '"a\\', '~ !'])
  lines.push(['parseKey', b(k), b(ri.parseKey(k))].join('\t'));
for (const [c, k] of [['', 'k'], ['alice@example.com', 'order 1'], ['ü ~!*()\'-_.', 'k'], ['', 'x'.repeat(600)], ['😀/?#&=+', 'y']])
  lines.push(['claimKey', b(c), b(k), b(ri.claimKey(c, k))].join('\t'));
const fp = (m, u, body, ct) => lines.push(['fingerprint', b(m), b(u), b(Buffer.from(body)), b(ct),
  ri.requestFingerprint(m, u, Buffer.from(body), ct).toString('base64')].join('\t'));
fp('POST', '/orders?dry=1', '{"b": 2, "a": 1}', 'application/json; charset=utf-8');
fp('POST', '/orders', '{"a":1,"b":2}', 'Application/VND.api+JSON');
fp('PATCH', '/orders/7', '{"b": 2, "a": 1}', 'text/plain');
fp('POST', '/orders', '', undefined);
fp('POST', '/x', '{not json', 'application/json');
fp('POST', '/x', [0xff, 0xfe, 0x7b, 0x7d], 'application/json');
fp('POST', '/x', '{"é": "\\u00e9"}', 'application/problem+json');
for (const r of [
  { status: 201, headers: [['content-type', 'application/json'], ['X-Order', '42'], ['x-multi', 'a'], ['x-multi', 'b']], body: Buffer.from('{"id":42}') },
  { status: 503, headers: [], body: Buffer.alloc(0) },
  { status: 200, headers: [['content-type', 'text/plain; charset=utf-8'], ['x-latin', 'caf\u00e9']], body: null, bytes: 70000 },
]) {
  const hs = r.headers.map(([n, v]) => `${b(n)}:${b(v)}`).join(',') || '-';
  lines.push(['idk2', String(r.status), hs, b(r.body), String(r.bytes ?? 0), b(sr.encodeResponse(r))].join('\t'));
}
console.log(lines.join('\n'));
