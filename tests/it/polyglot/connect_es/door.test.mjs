// claimd's HTTP door called by Connect's own runtime for JavaScript (connect-es), not by
// code of ours: the Connect protocol in JSON over HTTP/1.1, in binary over HTTP/2, and
// gRPC-Web over HTTP/1.1 (the protocol browsers use). No code generation: the service is
// read at run time from claimd's descriptor set (CLAIMD_FDS), and claimd is at CLAIMD_URL.
// `cargo test --test it polyglot::connect_es` runs this against claimd on both stores.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';

const baseUrl = process.env.CLAIMD_URL;
const fds = process.env.CLAIMD_FDS;
if (!baseUrl || !fds) throw new Error('set CLAIMD_URL and CLAIMD_FDS');

const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(fds)));
const service = registry.getService('claimd.v1.ClaimService');
const decision = (name) => registry.getEnum('claimd.v1.Decision').values
  .find((v) => v.name === `DECISION_${name}`).number;
const state = (name) => registry.getEnum('claimd.v1.State').values
  .find((v) => v.name === `STATE_${name}`).number;

const doors = {
  'Connect, JSON, HTTP/1.1': createConnectTransport({ baseUrl, httpVersion: '1.1' }),
  'Connect, binary, HTTP/2': createConnectTransport({
    baseUrl, httpVersion: '2', useBinaryFormat: true,
  }),
  'gRPC-Web, binary, HTTP/1.1': createGrpcWebTransport({ baseUrl, httpVersion: '1.1' }),
};

for (const [door, transport] of Object.entries(doors)) {
  const client = createClient(service, transport);
  const claim = (key) => ({
    namespace: 'connect-es',
    key,
    fingerprint: new TextEncoder().encode('body'),
    leaseTtl: { seconds: 30n },
  });

  test(`${door}: a claim is CLAIMED, its completion is stored, a later one replays it`, async () => {
    const key = `evt-${randomUUID()}`;
    const won = await client.claim(claim(key));
    assert.equal(won.decision, decision('CLAIMED'));
    assert.ok(won.claimToken.length > 0);
    assert.equal(won.receipt.state, state('PROCESSING'));
    assert.equal(won.receipt.attempt, 1);

    const again = await client.claim(claim(key));
    assert.equal(again.decision, decision('IN_FLIGHT'));
    assert.equal(again.claimToken, '');

    // Bytes that are not UTF-8, so nothing on the way may treat them as text.
    const response = new Uint8Array([0x00, 0xff, 0xfe, 0x80, 0x0a]);
    const done = await client.complete({
      namespace: 'connect-es', key, claimToken: won.claimToken, response,
    });
    assert.equal(done.receipt.state, state('COMPLETED'));

    const replay = await client.claim(claim(key));
    assert.equal(replay.decision, decision('COMPLETED'));
    assert.deepEqual(replay.receipt.response, response);
    const got = await client.get({ namespace: 'connect-es', key });
    assert.deepEqual(got.receipt.response, response);
  });

  test(`${door}: a bad request is InvalidArgument naming the field in a BadRequest`, async () => {
    await assert.rejects(client.claim({ ...claim(''), key: '' }), (error) => {
      assert.ok(error instanceof ConnectError, `a ConnectError, got ${error}`);
      assert.equal(error.code, Code.InvalidArgument, error.message);
      assert.match(error.rawMessage, /key/);
      assert.deepEqual(error.details.map((d) => d.type), ['google.rpc.BadRequest']);
      return true;
    });
  });

  test(`${door}: a stale token is Aborted and changes nothing`, async () => {
    const key = `evt-${randomUUID()}`;
    await client.claim(claim(key));
    const stale = randomUUID();
    await assert.rejects(
      client.complete({ namespace: 'connect-es', key, claimToken: stale, response: new Uint8Array() }),
      (error) => error instanceof ConnectError && error.code === Code.Aborted,
    );
    const got = await client.get({ namespace: 'connect-es', key });
    assert.equal(got.receipt.state, state('PROCESSING'));
  });
}
