/**
 * Entry of every benchmark child process (forked by bench/lib/ipc.ts with `--import tsx`): `argv[2]` names the
 * role, whose commands then arrive over the IPC channel. Roles are imported lazily so a child loads only its
 * own code (the memory benchmark's baseline must not include the other roles).
 */
import { type Handlers, serveCommands } from './lib/ipc.ts';

const role = process.argv[2];
let handlers: Handlers;
switch (role) {
  case 'parley':
    handlers = (await import('./roles/parley.ts')).parleyHandlers;
    break;
  case 'baseline':
    handlers = (await import('./roles/baseline.ts')).baselineHandlers;
    break;
  case 'receiver':
    handlers = (await import('./roles/receiver.ts')).receiverHandlers;
    break;
  case 'live-parley':
    handlers = (await import('./roles/live-parley.ts')).liveParleyHandlers;
    break;
  case 'live-baseline':
    handlers = (await import('./roles/live-baseline.ts')).liveBaselineHandlers;
    break;
  case 'network':
    handlers = (await import('./roles/network.ts')).networkHandlers;
    break;
  case 'scale':
    handlers = (await import('./roles/scale.ts')).scaleHandlers;
    break;
  default:
    throw new Error(`unknown bench role ${role}`);
}
serveCommands(handlers);
