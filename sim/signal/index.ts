/**
 * The simulator's Signal layer: simulated devices with real Signal identities (device.ts), the platform's
 * key wire format (keys.ts), message payloads (payload.ts) and message stanzas (stanza.ts). See README.md.
 */
export { AddressError, type LidLookup, sessionAddress, signalAddress } from './address.ts';
export {
  type Ciphertext,
  type CiphertextInput,
  SignalError,
  SimDevice,
  type SimDeviceOptions,
  type SimDeviceState,
} from './device.ts';
export {
  answerRetry,
  encryptToDevices,
  type FanoutCiphertext,
  type FanoutTarget,
  parseRetryReceipt,
  type RetryReceipt,
} from './fanout.ts';
export { type DeviceIdentity, verifyDeviceIdentity } from './identity.ts';
export {
  bigEndian,
  type DeviceKeys,
  type KeyBundle,
  type KeyFetchTarget,
  KeyNodeError,
  keyBundleUserNode,
  keyErrorUserNode,
  keyFetchResultNode,
  mergePreKeyUpload,
  parseKeyFetch,
  parsePreKeyUpload,
  parseSignedPreKey,
  preKeyNode,
  type SignedPreKey,
  signedPreKeyNode,
  takeBundle,
} from './keys.ts';
export {
  type DecodedMessage,
  decodeMessage,
  encodeMessage,
  messageText,
  PayloadError,
  pad,
  unpad,
} from './payload.ts';
export { parseDistribution, type SenderKeyDistribution, SenderKeys } from './sender-keys.ts';
export {
  asCiphertext,
  type EncInput,
  type EncType,
  type IncomingMessage,
  incomingMessageNode,
  type OutgoingEnc,
  type OutgoingMessage,
  parseOutgoingMessage,
  StanzaError,
} from './stanza.ts';
