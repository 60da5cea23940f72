/**
 * The examples each `parley` command shows at the end of its `--help` (commander's `addHelpText('after')`).
 * They name only options that exist and values the command accepts; docs/cli.md shows the same commands with
 * their output.
 */

function block(lines: string[], notes: string[] = []): string {
  return ['', 'Examples:', ...lines.map((line) => `  $ ${line}`), ...notes.map((n) => `\n${n}`)].join('\n');
}

const STORE_NOTE =
  "The CLI works on the server's store, found through the same settings: DATA_DIR (default ./data, holding\n" +
  'parley.db) or DATABASE_URL (postgres://… or sqlite:PATH). It refuses to create a store that does not exist\n' +
  'unless --init is given.';

/** Help examples by command. */
export const examples = {
  program: block(
    [
      'npx parley serve',
      'npx parley org list',
      'npx parley org create --name acme --plan pro',
      'DATA_DIR=/srv/parley/data npx parley key list --org default',
      'DATABASE_URL=postgres://parley@db/parley npx parley org list --json',
    ],
    [STORE_NOTE, "Run 'parley help <command>' (or '<command> --help') for a command's options and examples."],
  ),
  serve: block(['npx parley serve', 'PORT=3000 DATA_DIR=/srv/parley/data npx parley serve']),
  listen: block(
    [
      'npx parley listen --key svc_live_… --from 5511999990001             # every event, as it is recorded',
      'npx parley listen --key svc_test_… --types Message --after 42 --json',
      'npx parley listen --key svc_test_… --max-events 1                   # exits after the first event',
      'npx parley listen --print-ca          # --webhook: creates DATA_DIR/listen-ca.pem once, prints its path',
      'WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32 OUTBOUND_CA_FILE=./data/listen-ca.pem npm start',
      'npx parley listen --webhook --url http://localhost:8080 --key svc_test_…',
    ],
    [
      'By default listen reads the event stream (GET /v1/events/stream) with any key that has chat:webhook, test or\n' +
        'live, and changes nothing on the instance; if the connection drops it reconnects after the last event printed.\n' +
        "--webhook instead runs a local HTTPS receiver and sets it as the instance's webhook: test keys only (it\n" +
        "replaces the instance's webhook URL and HMAC key, and puts the URL back on Ctrl-C); parley must allow a\n" +
        'receiver on loopback and trust the local CA (the two lines above; development settings only).',
    ],
  ),
  org: block([
    'npx parley org list',
    'npx parley org create --name acme --plan pro',
    'npx parley org update acme --plan enterprise --per-minute 1000 --per-day 100000',
  ]),
  orgCreate: block(
    [
      'npx parley org create --name acme',
      'npx parley org create --name acme-pro --plan pro --json',
      'npx parley org create --name bigco --plan enterprise --per-minute 1000 --per-day 100000',
    ],
    [
      'Plans: free (60 requests/minute, 1,000/day, 2 instances per environment), pro (300/minute, 10,000/day,\n' +
        '20 instances), enterprise (its own limits: --per-minute and --per-day are both required, --max-instances\n' +
        'is optional (default 20); all three are refused on the other plans).',
    ],
  ),
  orgList: block(['npx parley org list', 'npx parley org list --json']),
  orgUpdate: block(
    [
      'npx parley org update acme --plan pro',
      'npx parley org update acme --plan enterprise --per-minute 1000 --per-day 100000',
      'npx parley org update acme --per-day 200000      # enterprise: change one limit, keep the other',
      'npx parley org update acme --max-instances 50    # enterprise: its own cap on instances per environment',
      'npx parley org update acme --plan free --json',
    ],
    [
      'Enterprise needs both limits (given now or kept from the current enterprise plan); free and pro refuse them.\n' +
        'A running server applies the change once its cached keys expire (AUTH_CACHE_TTL_SECONDS, 30 s by default).',
    ],
  ),
  instance: block([
    'npx parley instance list --org default',
    'npx parley instance create --org acme --env live --name sales',
  ]),
  instanceCreate: block(
    [
      'npx parley instance create --org acme --env test',
      'npx parley instance create --org acme --env live --name sales --json',
    ],
    [
      'The plan caps instances per environment: free 2, pro 20, enterprise its own (--max-instances on org\n' +
        'create/update). Past the cap the command is refused, as the API and the dashboard are.',
    ],
  ),
  instanceList: block([
    'npx parley instance list --org default',
    'npx parley instance list --org acme --json',
  ]),
  key: block([
    'npx parley key create --org default --env test',
    'npx parley key list --org default',
    'npx parley key revoke <key id>',
  ]),
  keyCreate: block(
    [
      'npx parley key create --org default --env test',
      'npx parley key create --org acme --env live --name backend --scopes chat:messages,chat:contacts --expires-in 30d',
      'npx parley key create --org acme --env live --instances <instance id> --json',
    ],
    [
      'Scopes default to chat:* (every chat operation). instances:manage (create, rename and delete instances over\n' +
        '/v1/instances) is granted only by name. Durations: 90s, 10m, 12h, 30d. --instances limits the key to\n' +
        'those instances of the organization (default: all of them in that environment).',
    ],
  ),
  keyList: block(['npx parley key list --org default', 'npx parley key list --org acme --json']),
  keyRevoke: block(
    ['npx parley key revoke <key id>', 'npx parley key revoke <key id> --json'],
    ['Key ids are listed by `parley key list`. A running server refuses the key within about a second.'],
  ),
  user: block([
    'npx parley user create --org default --email ana@example.com --role member',
    'npx parley user list --org default',
    'npx parley user remove ana@example.com',
  ]),
  userCreate: block(
    [
      'npx parley user create --org default --email ana@example.com --role member',
      'npx parley user create --org acme --email ops@acme.example --role owner --json',
    ],
    [
      'Roles: owner (everything, users too), member (instances, keys, webhooks, sandbox), viewer (reads).\n' +
        'The password is generated and printed once; only its Argon2id hash is stored.',
    ],
  ),
  userList: block(['npx parley user list --org default', 'npx parley user list --json']),
  userRemove: block(
    ['npx parley user remove ana@example.com', 'npx parley user remove <user id> --json'],
    ["Removing a user signs out its browsers at once. An organization's last owner cannot be removed."],
  ),
  userResetPassword: block(
    [
      'npx parley user reset-password --email ana@example.com',
      "printf '%s' 'a long new passphrase' | npx parley user reset-password --email ana@example.com --password-stdin",
    ],
    [
      'Without --password-stdin a random password is generated and printed once. Either way every browser the\n' +
        'user is signed in on is signed out, and only the Argon2id hash of the new password is stored.',
    ],
  ),
} as const;
