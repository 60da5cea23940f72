import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Badge, messageOf, Notice, Section, Time, useAction, useLatestRead } from '../ui.tsx';

/** One chat of the list (`GET /v1/chats`'s shape). */
interface Chat {
  jid: string;
  isGroup: boolean;
  name: string;
  lastMessage: { id: string; fromMe: boolean; kind: string; text: string; timestamp: string; state: string };
  unreadCount: number;
}

/** One stored message (`GET /v1/chats/{jid}/messages`'s shape). */
interface Message {
  id: string;
  fromMe: boolean;
  pushName: string;
  sender: string;
  timestamp: string;
  kind: string;
  message: {
    conversation: string;
    imageMessage?: { caption?: string; mimetype?: string };
    videoMessage?: { caption?: string; mimetype?: string };
    audioMessage?: { mimetype?: string };
    documentMessage?: { fileName?: string };
    stickerMessage?: { mimetype?: string };
    locationMessage?: { degreesLatitude: number; degreesLongitude: number; name: string };
    contactMessage?: { displayName: string };
  };
  state?: string;
  deletedAt?: string;
  editedAt?: string;
}

/** How a sent message's state reads: the platform's ticks in words. */
const STATE_TEXT: Record<string, string> = {
  pending: 'Sending',
  sent: 'Sent',
  delivered: 'Delivered',
  read: 'Read',
  played: 'Played',
  failed: 'Not sent',
};

/** Messages per page of a chat. */
const PAGE = 30;

/**
 * An instance's conversations (docs/dashboard.md#conversations): the chat list, most recent first, with unread
 * counts; a chat's messages, oldest at the top, with media previews read through the dashboard's copy of the
 * download route and each sent message's state (Sent → Delivered → Read); **Older messages** pages back; and for a
 * member a reply box that sends through the same service as `POST /v1/messages/send`. Read again whenever `version`
 * changes (the server pushed an event); for another instance (`id`) no chat is open.
 */
export function ConversationsPanel(props: { id: string; canManage: boolean; version: number }) {
  const base = `/instances/${props.id}`;
  const [chats, setChats] = useState<Chat[]>([]);
  const [open, setOpen] = useState<Chat | null>(null);
  const [messages, setMessages] = useState<Message[]>([]);
  const [older, setOlder] = useState<string | null>(null);
  const [pages, setPages] = useState(1);
  const [text, setText] = useState('');
  const [loadError, setLoadError] = useState<string | null>(null);
  const action = useAction();
  // Reads overlap (an event pushed while one runs, another chat chosen): only the latest started one is shown, so a
  // slow answer never puts an older list, or another chat's messages, over a newer one.
  const beginChatsRead = useLatestRead();
  const beginMessagesRead = useLatestRead();

  const loadChats = () => {
    const latest = beginChatsRead();
    return api<{ chats: Chat[] }>('GET', `${base}/chats?limit=50`)
      .then((page) => {
        if (!latest()) return;
        setChats(page.chats);
        setLoadError(null);
      })
      .catch((e) => {
        if (latest()) setLoadError(messageOf(e));
      });
  };
  const loadMessages = async (chat: Chat, count: number) => {
    const latest = beginMessagesRead();
    const all: Message[] = [];
    let cursor: string | null = null;
    try {
      for (let page = 0; page < count; page += 1) {
        const query: string = `limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const result: { messages: Message[]; nextCursor: string | null } = await api(
          'GET',
          `${base}/chats/${encodeURIComponent(chat.jid)}/messages?${query}`,
        );
        all.push(...result.messages);
        cursor = result.nextCursor;
        if (cursor === null) break;
      }
    } catch (e) {
      if (latest()) setLoadError(messageOf(e));
      return;
    }
    if (!latest()) return;
    setMessages(all.reverse());
    setOlder(cursor);
  };
  const shownId = useRef(props.id);
  useEffect(() => {
    if (shownId.current !== props.id) {
      // Another instance: its chats replace the previous one's, and no chat of the previous one stays open (nor is
      // its read on the way shown).
      shownId.current = props.id;
      beginMessagesRead();
      setChats([]);
      setOpen(null);
      setMessages([]);
      setOlder(null);
      setPages(1);
      setLoadError(null);
    }
    void loadChats();
  }, [props.id, props.version]);
  useEffect(() => {
    if (open) void loadMessages(open, pages);
  }, [open?.jid, pages, props.version]);

  const choose = (chat: Chat) => {
    if (chat.jid !== open?.jid) {
      // Until the chat's messages answer, none of the previous chat's are shown under its name.
      setMessages([]);
      setOlder(null);
    }
    setPages(1);
    setOpen(chat);
  };
  const reply = async (event: Event) => {
    event.preventDefault();
    if (!open) return;
    const sent = await action.run(
      () => api('POST', `${base}/chats/${encodeURIComponent(open.jid)}/reply`, { body: text }),
      'Reply sent',
    );
    if (sent !== undefined) {
      setText('');
      await Promise.all([loadChats(), loadMessages(open, pages)]);
    }
  };

  return (
    <Section title="Conversations">
      <Notice error={loadError} />
      <div class="conversations">
        <nav aria-label="Chats" class="chats">
          {chats.length === 0 && <p class="hint">No conversations yet.</p>}
          <ul class="chat-list">
            {chats.map((chat) => (
              <li key={chat.jid}>
                <button
                  type="button"
                  class={open?.jid === chat.jid ? 'chat current' : 'chat'}
                  aria-current={open?.jid === chat.jid ? 'true' : undefined}
                  onClick={() => choose(chat)}
                >
                  <span class="chat-name">{chat.name || chat.jid}</span>
                  {chat.unreadCount > 0 && (
                    <Badge tone="info">
                      {chat.unreadCount}
                      <span class="visually-hidden"> unread</span>
                    </Badge>
                  )}
                  <span class="chat-last">
                    {chat.lastMessage.fromMe ? 'You: ' : ''}
                    {chat.lastMessage.text || `[${chat.lastMessage.kind}]`}
                  </span>
                </button>
              </li>
            ))}
          </ul>
        </nav>
        {open && (
          <section class="chat-view" aria-label={`Conversation with ${open.name || open.jid}`}>
            <h3>{open.name || open.jid}</h3>
            {older !== null && (
              <button type="button" onClick={() => setPages(pages + 1)}>
                Older messages
              </button>
            )}
            <ol class="messages">
              {messages.map((m) => (
                <li key={m.id} class={m.fromMe ? 'message mine' : 'message'} data-message={m.id}>
                  {!m.fromMe && open.isGroup && <span class="sender">{m.pushName || m.sender}</span>}
                  <MessageContent base={base} message={m} />
                  <span class="meta">
                    <Time value={m.timestamp} />
                    {m.editedAt ? ' · edited' : ''}
                    {m.fromMe && m.state ? ` · ${STATE_TEXT[m.state] ?? m.state}` : ''}
                  </span>
                </li>
              ))}
            </ol>
            {props.canManage && (
              <form onSubmit={reply} class="row">
                <div class="grow">
                  <label for="reply-text">Reply</label>
                  <textarea
                    id="reply-text"
                    rows={2}
                    maxLength={4096}
                    required
                    value={text}
                    onInput={(e) => setText(e.currentTarget.value)}
                  />
                </div>
                <button type="submit" disabled={action.busy || text.trim() === ''}>
                  Send
                </button>
              </form>
            )}
            <Notice error={action.error} ok={action.ok} />
          </section>
        )}
      </div>
    </Section>
  );
}

/** A message's content: its text, a preview of its media (image, sticker, video, audio) or a link to its file. */
function MessageContent(props: { base: string; message: Message }) {
  const { message: m } = props;
  if (m.deletedAt) return <p class="deleted">This message was deleted</p>;
  const file = `/dashboard/api${props.base}/messages/${encodeURIComponent(m.id)}/media`;
  const caption = m.message.imageMessage?.caption ?? m.message.videoMessage?.caption ?? '';
  const text = m.message.conversation || caption;
  const remote = !m.fromMe;
  return (
    <>
      {remote && (m.kind === 'image' || m.kind === 'sticker') && (
        <img
          class="preview"
          src={file}
          alt={caption || `${m.kind} from ${m.pushName || m.sender}`}
          loading="lazy"
        />
      )}
      {remote && m.kind === 'video' && (
        // biome-ignore lint/a11y/useMediaCaption: a received video has no caption track to offer.
        <video class="preview" src={file} controls preload="metadata" />
      )}
      {remote && m.kind === 'audio' && (
        // biome-ignore lint/a11y/useMediaCaption: a received voice note has no caption track to offer.
        <audio src={file} controls preload="metadata" />
      )}
      {remote && m.kind === 'document' && (
        <a href={file} download>
          {m.message.documentMessage?.fileName ?? 'file'}
        </a>
      )}
      {m.kind === 'location' && m.message.locationMessage && (
        <p>
          Location: {m.message.locationMessage.name || 'shared place'} (
          {m.message.locationMessage.degreesLatitude}, {m.message.locationMessage.degreesLongitude})
        </p>
      )}
      {m.kind === 'contact' && m.message.contactMessage && (
        <p>Contact: {m.message.contactMessage.displayName}</p>
      )}
      {text && <p>{text}</p>}
      {!text && m.fromMe && m.kind !== 'text' && <p class="hint">[{m.kind}]</p>}
    </>
  );
}
