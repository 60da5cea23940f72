import { errors } from '../domain/errors.ts';
import type { MediaRule } from './kinds.ts';

/** A format decided from the bytes: the `file-type` extension and the MIME type sent to the platform. */
export interface DetectedFormat {
  ext: string;
  mime: string;
}

/** MIME types of text formats `file-type` cannot see (it reads magic numbers; text has none), by extension. */
const TEXT_TYPES: Record<string, string> = {
  txt: 'text/plain',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  json: 'application/json',
  xml: 'application/xml',
  html: 'text/html',
  htm: 'text/html',
  md: 'text/markdown',
  vcf: 'text/vcard',
  ics: 'text/calendar',
};

/** Legacy Office formats share one container (CFB); the file name tells which application opens it. */
const CFB_TYPES: Record<string, string> = {
  doc: 'application/msword',
  xls: 'application/vnd.ms-excel',
  ppt: 'application/vnd.ms-powerpoint',
  msg: 'application/vnd.ms-outlook',
};

/** The format of `data` from its magic numbers, or undefined when `file-type` does not recognise it. */
export async function detectFormat(data: Buffer): Promise<DetectedFormat | undefined> {
  // Imported at the first detection: file-type's module graph stays out of every start
  // (docs/decisions/0068-engines-loaded-on-first-use.md).
  const { fileTypeFromBuffer } = await import('file-type');
  const found = await fileTypeFromBuffer(data);
  return found ? { ext: found.ext, mime: found.mime } : undefined;
}

/**
 * Checks that `data` is one of the rule's formats (docs/decisions/0017-messages-and-media.md), judged from the bytes
 * only.
 * @throws DomainError invalid `<field> must be <formats>` (e.g. `image must be JPEG, PNG, GIF or WEBP`).
 */
export async function requireFormat(data: Buffer, field: string, rule: MediaRule): Promise<DetectedFormat> {
  const found = await detectFormat(data);
  if (rule.formats !== null && (!found || !rule.formats.includes(found.ext))) {
    throw errors.badRequest(`${field} must be ${rule.formatsLabel}`);
  }
  return found ?? { ext: '', mime: 'application/octet-stream' };
}

function extensionOf(fileName: string): string {
  const dot = fileName.lastIndexOf('.');
  return dot < 0 ? '' : fileName.slice(dot + 1).toLowerCase();
}

function looksLikeText(data: Buffer): boolean {
  const sample = data.subarray(0, 64 * 1024);
  if (sample.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(sample.subarray(0, sampleEnd(sample)));
    return true;
  } catch {
    return false;
  }
}

/** End of the sample without a UTF-8 sequence cut in half at the 64 KB boundary. */
function sampleEnd(sample: Buffer): number {
  let end = sample.length;
  for (let back = 1; back <= 3 && end - back >= 0; back++) {
    const byte = sample[end - back] ?? 0;
    if ((byte & 0xc0) === 0x80) continue;
    if (byte >= 0xc0) end -= back;
    break;
  }
  return end;
}

/**
 * The MIME type of a document (docs/decisions/0017-messages-and-media.md: any format). The bytes decide when
 * `file-type` recognises them; text (which has no magic number) is told apart from binary by decoding it, and only
 * then does the file name's extension pick among text types; legacy Office files (one shared container) are told
 * apart by extension too. Anything else is `application/octet-stream`.
 */
export function documentMimeType(found: DetectedFormat | undefined, data: Buffer, fileName: string): string {
  const ext = extensionOf(fileName);
  if (found) return found.ext === 'cfb' ? (CFB_TYPES[ext] ?? found.mime) : found.mime;
  if (looksLikeText(data)) return TEXT_TYPES[ext] ?? 'text/plain';
  return 'application/octet-stream';
}

/**
 * A document's display name when none is given (docs/decisions/0017-messages-and-media.md): the last segment of the
 * URL path, else `file` plus the extension of the detected format (`file.pdf`).
 */
export function defaultFileName(url: URL | undefined, found: DetectedFormat | undefined): string {
  if (url) {
    const segment = url.pathname
      .split('/')
      .filter((s) => s !== '')
      .at(-1);
    if (segment !== undefined) {
      let name = segment;
      try {
        name = decodeURIComponent(segment);
      } catch {
        // keep the raw segment
      }
      name = name.replace(/[\\/\0]/g, '_').trim();
      if (name !== '' && name !== '.' && name !== '..') return name.slice(0, 255);
    }
  }
  return found && found.ext !== '' ? `file.${found.ext}` : 'file';
}
