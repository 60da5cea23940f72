/**
 * A ready request body for every operation that takes one, published as the `example` of its
 * `application/json` request body in `/openapi.json`. Client generators put them in their docs, and the reference
 * page at `/docs` fills its "try it" form with them, so they are written to work as sent against a test key on a
 * sandbox instance linked to 5511999990001: recipients are sandbox users that exist (5511988887777, Ana; the
 * sandbox treats numbers ending in 0000 as unregistered), media are small data URIs or example URLs, and no
 * example names an instance (`from`), so the key's default instance answers. Ids of messages are examples of the
 * shape only: take real ones from earlier answers. The gateway twins get the same body, adapted by
 * src/http/gateway/openapi.ts (`message` instead of `body` for text).
 */

/** A 1×1 PNG (67 bytes), as a data URI: a valid image and sticker. */
const TINY_PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

/** A registered sandbox user, not the linked number. */
const ANA = '5511988887777';

/** Example request bodies by operationId (the `/v1` operations; gateway twins derive theirs). */
export const REQUEST_EXAMPLES: Readonly<Record<string, Record<string, unknown>>> = {
  createInstance: { name: 'sales' },
  updateInstance: { name: 'sales (Brazil)' },
  connectSession: { subscribe: ['Message', 'ReadReceipt', 'HistorySync', 'ChatPresence'] },
  requestPairingCode: { phone: '5511987654321' },
  setHmacKey: { hmacKey: '6c1f0e3a9b7d4c2e8f5a1b3c7d9e0f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c1d3e' },
  sandboxScan: { phone: '5511999990001' },
  sandboxInbound: { phone: ANA, body: 'Hi! Is the shop open today?', pushName: 'Ana' },
  sandboxInboundMedia: { phone: ANA, kind: 'image', media: TINY_PNG, caption: 'Is this the right part?' },
  sandboxReceipt: { id: '3EB0C767D26A1D2E5B3A61', state: 'read' },
  sandboxPresence: { phone: ANA, state: 'composing' },
  sandboxCall: { phone: ANA, video: false },
  sandboxDefineUser: { phone: '5511966665555', registered: true, pushName: 'Bia', fullName: 'Bia Santos' },
  sandboxEdit: { phone: ANA, id: '3A6D5E0F9C1B2A3D4E5F60718293A4B5', body: 'Is the shop open tomorrow?' },
  sandboxDelete: { phone: ANA, id: '3A6D5E0F9C1B2A3D4E5F60718293A4B5' },
  sandboxVote: { phone: ANA, id: '3EB0C767D26A1D2E5B3A61', options: ['Monday'] },
  sandboxCreateGroup: { name: 'Book club', ownerPhone: ANA, participants: ['5511977776666'] },
  sandboxGroupParticipants: {
    groupJid: '120363025246125486@g.us',
    phone: ANA,
    action: 'add',
    participants: ['5511966665555'],
  },
  sandboxGroupUpdate: { groupJid: '120363025246125486@g.us', phone: ANA, name: 'Book club 2026' },
  sendText: { phone: ANA, body: 'Hello *world*! Your order has shipped.' },
  followChannel: { invite: 'https://whatsapp.com/channel/0029VaParleyNews0000000001' },
  unfollowChannel: { jid: '120363000000000001@newsletter' },
  forwardMessage: { phone: '5511977776666', messageId: '3EB0C767D26A1D2E5B3A61' },
  setSessionPacing: { minIntervalMs: 3000, jitterMs: 2000, newChatsPerDay: 20 },
  sendPoll: {
    phone: ANA,
    name: 'Which day suits you?',
    options: ['Monday', 'Tuesday', 'Friday'],
    selectableCount: 1,
  },
  editMessage: {
    phone: ANA,
    id: '3EB0C767D26A1D2E5B3A61',
    body: 'Hello *world*! Your order ships tomorrow.',
  },
  deleteMessage: { phone: ANA, id: '3EB0C767D26A1D2E5B3A61' },
  sendChatPresence: { phone: ANA, state: 'composing' },
  sendImage: { phone: ANA, image: TINY_PNG, caption: 'Our new menu' },
  sendDocument: {
    phone: ANA,
    document: 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK',
    fileName: 'invoice.pdf',
    caption: 'January invoice',
  },
  sendAudio: { phone: ANA, audio: 'https://example.com/voice-note.ogg' },
  sendVideo: { phone: ANA, video: 'https://example.com/clip.mp4', caption: 'How to order' },
  sendSticker: { phone: ANA, sticker: TINY_PNG, packName: 'Shop', emojis: ['🎉'] },
  sendLocation: {
    phone: ANA,
    latitude: -23.5613,
    longitude: -46.6565,
    name: 'Our shop',
    address: 'Av. Paulista, 1578, São Paulo',
  },
  sendContact: {
    phone: ANA,
    name: 'Bruno Lima',
    vcard:
      'BEGIN:VCARD\nVERSION:3.0\nN:Lima;Bruno;;;\nFN:Bruno Lima\nTEL;type=CELL;waid=5511977776666:+55 11 97777-6666\nEND:VCARD',
  },
  sendReaction: { phone: ANA, id: '3EB0C767D26A1D2E5B3A61', body: '👍' },
  markRead: { id: ['3EB0C767D26A1D2E5B3A61'], chatPhone: ANA },
  checkContacts: { phones: [ANA, '5511977770000'] },
  createGroup: { name: 'Shop team', participants: [ANA, '5511977776666'] },
  updateGroupParticipants: {
    groupJid: '120363025246125486@g.us',
    action: 'add',
    participants: ['5511966665555'],
  },
  updateGroup: { groupJid: '120363025246125486@g.us', topic: 'Orders and shifts', disappearingTimer: 604800 },
  leaveGroup: { groupJid: '120363025246125486@g.us' },
  joinGroup: { inviteLink: 'https://chat.whatsapp.com/AbCdEfGhIjK1234567890' },
  revokeGroupInviteLink: { groupJid: '120363025246125486@g.us' },
  setWebhook: { webhookUrl: 'https://hooks.example.com/parley' },
  createWebhookEndpoint: {
    url: 'https://hooks.example.com/orders',
    events: ['Message', 'MessageStatus'],
    description: 'order updates for the shop backend',
  },
  updateWebhookEndpoint: { events: ['Message'], enabled: true },
  rotateWebhookEndpointSecret: { previousSecretGraceSeconds: 3600 },
  updateProfile: { name: 'Acme Store', about: 'Open 9–18, Monday to Saturday', picture: TINY_PNG },
  updatePrivacySettings: { lastSeen: 'contacts', readReceipts: 'none' },
  blockContact: { phone: '5511977776666' },
  unblockContact: { phone: '5511977776666' },
  setCallSettings: { autoReject: true, message: "Sorry, we can't take calls. Please send a message." },
  muteChat: { until: '2030-01-01T00:00:00Z' },
  postTextStatus: { body: 'Open until 8 pm today', backgroundColor: '#1E88E5', font: 1, contacts: [ANA] },
  postImageStatus: { image: TINY_PNG, caption: 'New in store', contacts: [ANA] },
  postVideoStatus: { video: 'https://example.com/clip.mp4', caption: 'How to order', contacts: [ANA] },
  createLabel: { name: 'New customer', color: 1 },
  updateLabel: { name: 'Paid in full', color: 5 },
  addChatLabels: { labelIds: ['1', '2'] },
  setChatLabels: { labelIds: ['2'] },
};
