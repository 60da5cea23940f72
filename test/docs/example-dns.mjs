// Preloaded (node --import) into the server the docs test starts. The test machine has no DNS, while the docs
// use example.com hostnames a reader's machine resolves (a webhook endpoint, a media URL). Here they resolve to
// example.com's public address, which this machine cannot reach: parley accepts the URL as it would for a reader,
// and its delivery attempts fail and are retried. Every other name resolves as usual.
import dns from 'node:dns';
import { syncBuiltinESMExports } from 'node:module';

const EXAMPLES = /(^|\.)example\.com$/i;
const ADDRESS = { address: '93.184.215.14', family: 4 };
const { lookup } = dns.promises;

dns.promises.lookup = (hostname, options) =>
  EXAMPLES.test(hostname) ? Promise.resolve(options?.all ? [ADDRESS] : ADDRESS) : lookup(hostname, options);
syncBuiltinESMExports();
