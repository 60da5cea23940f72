/**
 * Delivery of server stanzas to devices: to every open socket of the device, or, while it has none, into its
 * offline queue, flushed at its next login before the `<ib><offline count=N/>` marker (Baileys'
 * Socket/socket.js `CB:ib,,offline` ends the offline phase).
 */
import type { BinaryNode } from 'baileys';
import type { Device } from '../model/accounts.ts';

/** Sends a `<message>` to the device's open sockets or queues it; returns how many sockets took it now. */
export function deliver(device: Device, node: BinaryNode): number {
  if (device.sockets.size === 0) {
    device.offline.push(node);
    return 0;
  }
  for (const socket of device.sockets) socket.sendMessage(node);
  return device.sockets.size;
}

/** Removes and returns the device's queued stanzas, oldest first. */
export function takeOffline(device: Device): BinaryNode[] {
  return device.offline.splice(0, device.offline.length);
}

/**
 * Runs `task` after every earlier task of the same key settled: one user's Signal sessions are updated by one
 * operation at a time (libsignal session records are read-modify-write).
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.then(task, task);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }
}
