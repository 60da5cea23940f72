/**
 * The plaintext inside a Signal message on the platform: a protobuf `Message` (WAProto, exported by Baileys as
 * `proto`) followed by random padding of 1 to 16 bytes, each byte holding the padding length (Baileys
 * lib/Utils/generics.js writeRandomPadMax16 / unpadRandomMax16, encodeWAMessage). Copies a device sends to its
 * own account's other devices wrap the message as `deviceSentMessage { destinationJid, message }`
 * (lib/Socket/messages-send.js relayMessage), which the receiving device unwraps (decode-wa-message.js).
 */
import { randomBytes } from 'node:crypto';
import { proto } from 'baileys';

/** Padding that is not 1–16 bytes of its own length, or a payload that is not a protobuf `Message`. */
export class PayloadError extends Error {
  override readonly name = 'PayloadError';
}

/** Appends 1–16 random-length padding bytes, each equal to the padding length (writeRandomPadMax16). */
export function pad(bytes: Uint8Array): Buffer {
  const length = ((randomBytes(1)[0] ?? 0) & 0x0f) + 1;
  return Buffer.concat([bytes, Buffer.alloc(length, length)]);
}

/**
 * Strips the padding; stricter than Baileys' unpadRandomMax16 (which only checks the length byte): every
 * padding byte must equal the length and the length must be 1–16.
 * @throws PayloadError when the padding is malformed.
 */
export function unpad(bytes: Uint8Array): Buffer {
  const length = bytes[bytes.length - 1];
  if (length === undefined || length < 1 || length > 16 || length > bytes.length) {
    throw new PayloadError(`padding length ${length ?? 'missing'} is not 1-16 within ${bytes.length} bytes`);
  }
  for (let i = bytes.length - length; i < bytes.length; i++) {
    if (bytes[i] !== length) throw new PayloadError('padding bytes differ from the padding length');
  }
  return Buffer.from(bytes.subarray(0, bytes.length - length));
}

/** Encodes and pads a `Message` as a device encrypts it (Baileys' encodeWAMessage). */
export function encodeMessage(message: proto.IMessage): Buffer {
  return pad(proto.Message.encode(message).finish());
}

/** A decrypted `Message`; `destinationJid` is set when it came wrapped as a `deviceSentMessage`. */
export interface DecodedMessage {
  message: proto.Message;
  /** The chat the sender's own device sent the message to (deviceSentMessage.destinationJid). */
  destinationJid?: string;
}

/**
 * Unpads and decodes a decrypted plaintext, unwrapping `deviceSentMessage` (decode-wa-message.js).
 * @throws PayloadError for bad padding or bytes that are not a `Message`.
 */
export function decodeMessage(plaintext: Uint8Array): DecodedMessage {
  let message: proto.Message;
  try {
    message = proto.Message.decode(unpad(plaintext));
  } catch (error) {
    if (error instanceof PayloadError) throw error;
    throw new PayloadError(`not a Message: ${(error as Error).message}`);
  }
  const sent = message.deviceSentMessage;
  if (sent?.message) {
    const inner = proto.Message.create(sent.message);
    return sent.destinationJid ? { message: inner, destinationJid: sent.destinationJid } : { message: inner };
  }
  return { message };
}

/**
 * The text of a `Message`, whichever way it is carried: `conversation`, or `extendedTextMessage.text`
 * (Baileys sends replies, links and mentions as extendedTextMessage). Undefined for non-text messages.
 */
export function messageText(message: proto.IMessage): string | undefined {
  return message.conversation ?? message.extendedTextMessage?.text ?? undefined;
}
