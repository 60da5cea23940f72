import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Curve, generateSignalPubKey, WA_CERT_DETAILS } from 'baileys';
import * as curve from 'libsignal/src/curve.js';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import { trustPlatformRoot } from '../../src/engines/baileys/platform.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { fakeFactory, storePairedCreds } from './fake-socket.ts';
import { liveFixture, recordingContext, silentLogger } from './support.ts';

const platformRoot = WA_CERT_DETAILS.PUBLIC_KEY;

describe('live engine pointed at a platform simulator (docs/decisions/0007-simulator.md)', () => {
  after(() => {
    WA_CERT_DETAILS.PUBLIC_KEY = platformRoot;
  });

  it('passes PLATFORM_URL as waWebSocketUrl and trusts the root key the way the Noise handshake reads it', async () => {
    const fixture = await liveFixture('sqlite');
    try {
      const root = Curve.generateKeyPair();
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p' }),
        logger: silentLogger(),
        socketFactory: fake.factory,
        platform: { url: 'ws://127.0.0.1:7070/ws/chat', rootKey: Buffer.from(root.public) },
      });
      const rc = recordingContext(fixture, fixture.instanceIds[0] ?? '');
      await storePairedCreds(rc.context.auth);
      const session = engine.createSession(rc.context);
      await session.connect();
      assert.equal(fake.sockets[0]?.config.waWebSocketUrl, 'ws://127.0.0.1:7070/ws/chat');

      // noise-handler.js checks the intermediate certificate with Curve.verify(WA_CERT_DETAILS.PUBLIC_KEY, …):
      // a 32-byte key that libsignal's verifySignature, given the 0x05-prefixed form, accepts for the root.
      assert.deepEqual(WA_CERT_DETAILS.PUBLIC_KEY, root.public);
      assert.equal(WA_CERT_DETAILS.PUBLIC_KEY.length, 32);
      const details = Buffer.from('intermediate certificate details');
      const signature = Curve.sign(root.private, details);
      assert.equal(
        curve.verifySignature(generateSignalPubKey(WA_CERT_DETAILS.PUBLIC_KEY), details, signature),
        true,
      );
      assert.equal(curve.verifySignature(generateSignalPubKey(platformRoot), details, signature), false);
      await engine.close();
    } finally {
      await fixture.test.cleanup();
    }
  });

  it('changes nothing without a platform: Baileys default URL and root', async () => {
    WA_CERT_DETAILS.PUBLIC_KEY = platformRoot;
    const fixture = await liveFixture('sqlite');
    try {
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p' }),
        logger: silentLogger(),
        socketFactory: fake.factory,
      });
      const rc = recordingContext(fixture, fixture.instanceIds[0] ?? '');
      await storePairedCreds(rc.context.auth);
      await engine.createSession(rc.context).connect();
      assert.equal('waWebSocketUrl' in (fake.sockets[0]?.config ?? {}), false);
      assert.equal(WA_CERT_DETAILS.PUBLIC_KEY, platformRoot);
      await engine.close();
    } finally {
      await fixture.test.cleanup();
    }
  });

  it('refuses a root key that is not 32 bytes', () => {
    assert.throws(() => trustPlatformRoot(Buffer.alloc(33, 5)), /must be 32 bytes, got 33/);
  });
});
