import type { Agent } from 'node:https';
import { downloadPlatformMedia } from '../../src/engines/baileys/media-download.ts';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import { FakeEngine } from '../support/fake-engine.ts';

/**
 * A fake live engine whose sessions download a message's media as the live engine does
 * (src/engines/baileys/media-download.ts `downloadPlatformMedia`), through `agent`, from the reference in the
 * message's `content.download`: the download path's answers reach `GET /v1/messages/{id}/media` unchanged.
 */
export function downloadingEngine(agent: Agent): FakeEngine {
  class DownloadingEngine extends FakeEngine {
    override createSession(context: EngineSessionContext) {
      const session = super.createSession(context);
      return Object.assign(session, {
        downloadMedia: (message: { id: string; content: { download?: string } }, maxBytes: number) =>
          downloadPlatformMedia(message.content.download ?? '', message.id, maxBytes, agent),
      });
    }
  }
  return new DownloadingEngine();
}
