import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BrokerUrlError, brokerSubject, isBrokerUrl, parseBrokerUrl } from '../../src/brokers/urls.ts';

describe('broker URLs (docs/decisions/0037-broker-endpoints.md)', () => {
  it('reads amqp and amqps URLs as the RabbitMQ URI specification does', () => {
    assert.deepEqual(parseBrokerUrl('amqp://rabbit.example.com'), {
      target: {
        kind: 'amqp',
        tls: false,
        hostname: 'rabbit.example.com',
        port: 5672,
        username: 'guest',
        password: 'guest',
        vhost: '/',
        exchange: 'parley',
      },
      masked: 'amqp://rabbit.example.com',
      hasSecret: false,
    });
    assert.deepEqual(
      parseBrokerUrl('amqps://app:p%40ss@rabbit.example.com:5673/prod%2Feu?exchange=events.v1'),
      {
        target: {
          kind: 'amqp',
          tls: true,
          hostname: 'rabbit.example.com',
          port: 5673,
          username: 'app',
          password: 'p@ss',
          vhost: 'prod/eu',
          exchange: 'events.v1',
        },
        masked: 'amqps://app:****@rabbit.example.com:5673/prod%2Feu?exchange=events.v1',
        hasSecret: true,
      },
    );
    const tls = parseBrokerUrl('amqps://[2001:db8::1]/%2F');
    assert.equal(tls.target.hostname, '2001:db8::1');
    assert.equal(tls.target.kind === 'amqp' && tls.target.vhost, '/');
    assert.equal(tls.target.kind === 'amqp' && tls.target.port, 5671);
    // A user without a password logs in with an empty one (it is not a secret to mask).
    const user = parseBrokerUrl('amqp://reader@rabbit.example.com/');
    assert.equal(user.hasSecret, false);
    assert.equal(user.target.kind === 'amqp' && user.target.password, '');
  });

  it('reads nats URLs with a user and password, a token, or neither', () => {
    assert.deepEqual(parseBrokerUrl('nats://nats.example.com'), {
      target: { kind: 'nats', hostname: 'nats.example.com', port: 4222 },
      masked: 'nats://nats.example.com',
      hasSecret: false,
    });
    assert.deepEqual(parseBrokerUrl('nats://s3cr3t@nats.example.com:4223'), {
      target: { kind: 'nats', hostname: 'nats.example.com', port: 4223, token: 's3cr3t' },
      masked: 'nats://****@nats.example.com:4223',
      hasSecret: true,
    });
    assert.deepEqual(parseBrokerUrl('nats://app:pw@nats.example.com/'), {
      target: { kind: 'nats', hostname: 'nats.example.com', port: 4222, user: 'app', pass: 'pw' },
      masked: 'nats://app:****@nats.example.com/',
      hasSecret: true,
    });
  });

  it('refuses what it cannot read, with a message naming the rule', () => {
    const refused: [string, string][] = [
      ['amqp://', 'URL has no host'],
      [
        'amqp://h/?exchange=',
        'URL exchange must be 1 to 255 letters, digits, hyphens, underscores, periods or colons',
      ],
      [
        `amqp://h/?exchange=${'x'.repeat(256)}`,
        'URL exchange must be 1 to 255 letters, digits, hyphens, underscores, periods or colons',
      ],
      ['amqp://h/?heartbeat=5', 'URL query parameter heartbeat is not supported (only exchange)'],
      ['amqp://h/a/b', 'URL vhost must be one path segment (write / as %2F)'],
      ['amqp://h/%E0%A4%A', 'URL vhost is not valid percent-encoding'],
      ['amqp://:pw@h', 'URL has a password but no user'],
      ['amqp://h#x', 'URL must not have a fragment'],
      ['nats://h?x=1', 'nats URL must not have a query'],
      ['https://h', 'URL scheme must be amqp, amqps or nats (got https)'],
      ['not a url', 'URL is not valid'],
      [`nats://${'h'.repeat(4100)}`, 'URL is longer than 4096 characters'],
    ];
    for (const [url, message] of refused) {
      assert.throws(
        () => parseBrokerUrl(url),
        (error: unknown) => error instanceof BrokerUrlError && error.message === message,
        url,
      );
    }
  });

  it('tells broker URLs by their scheme and names the subject of an event', () => {
    assert.equal(isBrokerUrl('AMQP://h'), true);
    assert.equal(isBrokerUrl(' nats://h'), true);
    assert.equal(isBrokerUrl('amqps:whatever'), true);
    assert.equal(isBrokerUrl('https://h'), false);
    assert.equal(isBrokerUrl('natsx://h'), false);
    assert.equal(
      brokerSubject('0b7f3c1e-0000-4000-8000-000000000001', 'ReadReceipt'),
      'parley.0b7f3c1e-0000-4000-8000-000000000001.ReadReceipt',
    );
  });
});
