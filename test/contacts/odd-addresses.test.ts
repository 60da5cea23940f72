/**
 * Odd address forms (a `+`, spaces, a leading zero, device parts, `@c.us`, LIDs, newsletters, broadcasts, hosted
 * domains, oversized values, non-ASCII digits) on every route that names a chat or user
 * (docs/decisions/0038-lid-mappings.md, 0001-envelope-and-error-codes.md): each is taken or refused with a 4xx naming
 * the field, never answered 500. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, OWN } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const ANA_LID = '137777888891155';

for (const dialect of testDialects()) {
  describe(`odd addresses on every addressing route [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      await t.call('POST', '/v1/sandbox/users', { phone: OWN, verifiedName: 'Shop' });
    });
    after(() => t.close());

    it('answers each odd address form with a 2xx or 4xx, never a server error', async () => {
      const odd = [
        '+5511988887777',
        ' 5511988887777',
        '5511988887777 ',
        '05511988887777',
        '5511988887777@s.whatsapp.net',
        '5511988887777:3@s.whatsapp.net',
        '5511988887777.0:3@s.whatsapp.net',
        '5511988887777@c.us',
        '123@g.us',
        '120363025246125486@g.us',
        '1-2@g.us',
        `${ANA_LID}@lid`,
        `${ANA_LID}:2@lid`,
        '123@lid',
        '0@lid',
        '00000000000000000000@lid',
        '120363025246125486@newsletter',
        'status@broadcast',
        '123@broadcast',
        '@s.whatsapp.net',
        '5511988887777@',
        '١١١١١١١١١',
        '5'.repeat(200),
        `${'5'.repeat(200)}@s.whatsapp.net`,
        `${'5'.repeat(41)}@g.us`,
        '%',
        'a/b',
        '5511988887777@hosted',
        '5511988887777@hosted.lid',
      ];
      const problems: string[] = [];
      for (const value of odd) {
        const enc = encodeURIComponent(value);
        const calls: [string, string, unknown?][] = [
          ['GET', `/v1/chats/${enc}/messages`],
          ['GET', `/v1/chats/${enc}/labels`],
          ['POST', `/v1/chats/${enc}/labels`, { labelIds: ['1'] }],
          ['PUT', `/v1/chats/${enc}/labels`, { labelIds: [] }],
          ['DELETE', `/v1/chats/${enc}/labels/1`],
          ['POST', `/v1/chats/${enc}/archive`],
          ['POST', `/v1/chats/${enc}/mute`, {}],
          ['POST', '/v1/messages/send', { phone: value, body: 'x' }],
          ['POST', '/v1/messages/read', { id: ['X'], chatPhone: value }],
          ['POST', '/v1/messages/react', { phone: value, id: 'X', body: '👍' }],
          ['POST', '/v1/chats/presence', { phone: value, state: 'composing' }],
          ['POST', '/v1/messages/edit', { phone: value, id: 'X', body: 'y' }],
          ['POST', '/v1/messages/delete', { phone: value, id: 'X' }],
          ['GET', `/v1/contacts/lid?lid=${enc}`],
          ['GET', `/v1/contacts/lid?phone=${enc}`],
          ['GET', `/v1/contacts/info?phone=${enc}`],
          ['GET', `/v1/contacts/avatar?phone=${enc}`],
          ['POST', '/v1/contacts/check', { phones: [value] }],
          ['POST', '/v1/contacts/block', { phone: value }],
          ['GET', `/v1/groups/info?jid=${enc}`],
          ['GET', `/v1/channels/info?jid=${enc}`],
          ['POST', '/v1/channels/follow', { jid: value }],
          ['POST', '/v1/status/text', { body: 'x', contacts: [value] }],
        ];
        for (const [method, url, body] of calls) {
          const res = await t.call(method as 'GET', url, body);
          if (res.status >= 500)
            problems.push(
              `${method} ${url} ${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body)}`,
            );
        }
      }
      assert.deepEqual(problems, []);
    });
  });
}
