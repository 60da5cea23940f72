/**
 * Profile pictures: the `w:profile:picture` iq as Baileys 7 sends it (Socket/chats.js profilePictureUrl:
 * `<iq target="<jid>" to="s.whatsapp.net" type="get" xmlns="w:profile:picture"><picture type="image|preview"
 * query="url"/></iq>`, a `<tctoken>` child possibly beside it) and reads the answer (`<picture>`'s `url`, and its
 * `id`). A user without a picture, or a target that is no simulated user, answers 404 item-not-found, as the
 * platform does for a user with no picture.
 */
import { type BinaryNode, getBinaryNodeChild } from 'baileys';
import type { Accounts } from '../model/accounts.ts';
import type { IqAnswer } from './iq.ts';

/** Answers a `w:profile:picture` get for `iq.attrs.target` (a phone or LID JID). */
export function profilePictureAnswer(iq: BinaryNode, accounts: Accounts): IqAnswer {
  const picture = getBinaryNodeChild(iq, 'picture');
  if (iq.attrs.type !== 'get' || !picture) return { error: { code: 400, text: 'bad-request' } };
  const user = accounts.resolve(iq.attrs.target ?? '')?.user;
  if (!user?.registered || !user.avatar) return { error: { code: 404, text: 'item-not-found' } };
  const type = picture.attrs.type === 'preview' ? 'preview' : 'image';
  return {
    content: [
      {
        tag: 'picture',
        attrs: {
          id: user.avatar.id,
          type,
          url: user.avatar.url,
          direct_path: new URL(user.avatar.url).pathname,
        },
      },
    ],
  };
}
