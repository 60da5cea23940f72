/**
 * Channels (newsletters) on the simulated platform, modelled minimally: a channel has a JID (`<digits>@newsletter`),
 * a name, an optional description, an invite code and the phones of the accounts that follow it. Channels are made
 * through the control API (control/channels.ts) and answered to the accounts' `w:mex` queries
 * (server/newsletter-mex.ts). In memory only, per simulator (keyed by its `Accounts`), like calls.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { Accounts } from './accounts.ts';

/** One channel. */
export interface SimChannel {
  jid: string;
  name: string;
  description?: string;
  /** Letters and digits; the link is `https://whatsapp.com/channel/<invite>`. */
  invite: string;
  /** Epoch seconds of creation. */
  createdAt: number;
  /** Phones of the accounts following the channel, in the order they followed. */
  followers: Set<string>;
}

/** The channels of one simulator. */
export class Newsletters {
  readonly #byJid = new Map<string, SimChannel>();

  /** Creates a channel with a new JID and invite code. */
  create(input: { name: string; description?: string }): SimChannel {
    let jid = '';
    do jid = `120363${String(randomInt(1e9, 1e10 - 1))}${String(randomInt(1e5, 1e6 - 1))}@newsletter`;
    while (this.#byJid.has(jid));
    const invite = `0029Va${randomBytes(15).toString('base64url').replace(/[-_]/g, 'x').slice(0, 20)}`;
    const channel: SimChannel = {
      jid,
      name: input.name,
      ...(input.description === undefined ? {} : { description: input.description }),
      invite,
      createdAt: Math.floor(Date.now() / 1000),
      followers: new Set(),
    };
    this.#byJid.set(jid, channel);
    return channel;
  }

  /** The channel with JID `jid`, or undefined. */
  byJid(jid: string): SimChannel | undefined {
    return this.#byJid.get(jid);
  }

  /** The channel with invite code `invite`, or undefined. */
  byInvite(invite: string): SimChannel | undefined {
    return [...this.#byJid.values()].find((c) => c.invite === invite);
  }

  /** The channels account `phone` follows, oldest first. */
  followedBy(phone: string): SimChannel[] {
    return [...this.#byJid.values()].filter((c) => c.followers.has(phone));
  }
}

const NEWSLETTERS = new WeakMap<Accounts, Newsletters>();

/** The channels of the simulator whose accounts are `accounts`. */
export function newslettersOf(accounts: Accounts): Newsletters {
  let found = NEWSLETTERS.get(accounts);
  if (!found) {
    found = new Newsletters();
    NEWSLETTERS.set(accounts, found);
  }
  return found;
}
