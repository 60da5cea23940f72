import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { DomainError } from '../../src/domain/errors.ts';
import { statusOf } from '../../src/http/errors.ts';
import { defaultFileName, detectFormat, documentMimeType, requireFormat } from '../../src/media/detect.ts';
import { stickerExif, withExif } from '../../src/media/exif.ts';
import { Ffmpeg, ffmpegCandidates, packagedFfmpegPath } from '../../src/media/ffmpeg.ts';
import { bodyLimitFor, MEDIA_RULES } from '../../src/media/kinds.ts';
import { decodeDataUri } from '../../src/media/source.ts';
import { makeSticker, stickerConversions } from '../../src/media/sticker.ts';
import { fixture } from '../messages/support.ts';
import { ffmpegAvailable } from '../support/ffmpeg.ts';
import { pixelFramesGif } from '../support/gif.ts';
import { readStickerExif } from '../support/sticker-exif.ts';

describe('media input rules (docs/decisions/0017-messages-and-media.md)', () => {
  it('decodes base64 data URIs whatever the declared type, and refuses malformed ones naming the field', () => {
    const bytes = fixture('tiny.png');
    const rule = MEDIA_RULES.image;
    assert.deepEqual(
      decodeDataUri(`data:image/jpeg;base64,${bytes.toString('base64')}`, 'image', rule),
      bytes,
    );
    assert.deepEqual(
      decodeDataUri(`data:;base64,${bytes.toString('base64url')}`, 'image', rule),
      bytes,
      'base64url',
    );
    const wrapped = bytes.toString('base64').replace(/(.{20})/g, '$1\n');
    assert.deepEqual(decodeDataUri(`data:image/png;base64,${wrapped}`, 'image', rule), bytes, 'line breaks');
    const error = (raw: string) => {
      try {
        decodeDataUri(raw, 'image', rule);
      } catch (e) {
        assert.ok(e instanceof DomainError);
        return [statusOf(e.code), e.message];
      }
      return undefined;
    };
    assert.deepEqual(error('data:image/png'), [
      400,
      'image data URI must look like data:<type>;base64,<data>',
    ]);
    assert.deepEqual(error('data:image/png;charset=x,abc'), [
      400,
      'image data URI must be base64-encoded (data:<type>;base64,<data>)',
    ]);
    assert.deepEqual(error('data:image/png;base64,ab$c'), [400, 'image data URI holds invalid base64']);
    const tiny = { ...rule, maxBytes: 3, maxLabel: '3 bytes' };
    assert.deepEqual(decodeDataUri('data:;base64,AAAA', 'x', tiny).length, 3);
    try {
      decodeDataUri('data:;base64,AAAAAA==', 'x', tiny);
      assert.fail('over the limit');
    } catch (e) {
      assert.ok(e instanceof DomainError);
      assert.deepEqual([statusOf(e.code), e.message], [413, 'x must be at most 3 bytes']);
    }
  });

  it('judges formats from the bytes only', async () => {
    assert.deepEqual(await detectFormat(fixture('tiny.jpg')), { ext: 'jpg', mime: 'image/jpeg' });
    assert.equal(await detectFormat(fixture('not-an-image.jpg')), undefined);
    await assert.rejects(requireFormat(fixture('not-an-image.jpg'), 'image', MEDIA_RULES.image), {
      message: 'image must be JPEG, PNG, GIF or WEBP',
    });
    assert.deepEqual(await requireFormat(Buffer.from('anything'), 'document', MEDIA_RULES.document), {
      ext: '',
      mime: 'application/octet-stream',
    });
  });

  it('names documents from the URL or file.<ext>, and types text documents by decoding them', () => {
    assert.equal(
      defaultFileName(new URL('https://x.test/a/b/Relat%C3%B3rio.pdf?x=1'), undefined),
      'Relatório.pdf',
    );
    assert.equal(
      defaultFileName(new URL('https://x.test/'), { ext: 'pdf', mime: 'application/pdf' }),
      'file.pdf',
    );
    assert.equal(defaultFileName(undefined, undefined), 'file');
    assert.equal(defaultFileName(new URL('https://x.test/%2e%2e'), undefined), 'file', 'no dot-dot names');
    const text = Buffer.from('héllo\n');
    assert.equal(documentMimeType(undefined, text, 'notes.txt'), 'text/plain');
    assert.equal(documentMimeType(undefined, text, 'data.json'), 'application/json');
    assert.equal(documentMimeType(undefined, text, 'noext'), 'text/plain');
    assert.equal(
      documentMimeType(undefined, Buffer.from([0xff, 0xfe, 0]), 'x.txt'),
      'application/octet-stream',
    );
    assert.equal(
      documentMimeType({ ext: 'cfb', mime: 'application/x-cfb' }, text, 'old.doc'),
      'application/msword',
    );
    assert.equal(documentMimeType({ ext: 'pdf', mime: 'application/pdf' }, text, 'x.txt'), 'application/pdf');
  });

  it('sizes route body limits for the largest media as base64 wrapped in 76-column CRLF lines plus 1 MB (docs/decisions/0020-security-promises.md)', () => {
    const wrapped = (bytes: number) => {
      const base64 = Math.ceil(bytes / 3) * 4;
      return base64 + Math.ceil(base64 / 76) * 4 + 1024 * 1024;
    };
    assert.equal(bodyLimitFor('image'), wrapped(16 * 1024 * 1024));
    assert.equal(bodyLimitFor('document'), wrapped(100 * 1024 * 1024));
    assert.ok(bodyLimitFor('sticker') > 500 * 1024 * (4 / 3));
    // The JSON of a data URI holding the largest image as MIME wraps base64 (`\r\n`, 4 bytes a line) fits.
    const line = 'A'.repeat(76);
    const lines = Math.ceil((Math.ceil((16 * 1024 * 1024) / 3) * 4) / 76);
    const json = JSON.stringify({
      phone: '5511999990002',
      image: `data:image/jpeg;base64,${`${line}\r\n`.repeat(lines)}`,
    });
    assert.ok(Buffer.byteLength(json) <= bodyLimitFor('image'), `${Buffer.byteLength(json)} bytes`);
  });
});

describe('stickers (docs/decisions/0017-messages-and-media.md)', () => {
  it('writes the platform sticker EXIF: TIFF header, tag 0x5741, JSON length at offset 14', async () => {
    const exif = stickerExif({ packName: 'P', packPublisher: 'Q', emojis: ['😀'] });
    assert.deepEqual([...exif.subarray(0, 14)], [0x49, 0x49, 0x2a, 0, 8, 0, 0, 0, 1, 0, 0x41, 0x57, 7, 0]);
    const json = JSON.parse(exif.subarray(22).toString('utf8'));
    assert.equal(exif.readUInt32LE(14), exif.length - 22);
    assert.deepEqual(Object.keys(json), [
      'sticker-pack-id',
      'sticker-pack-name',
      'sticker-pack-publisher',
      'emojis',
    ]);
    assert.match(json['sticker-pack-id'], /^parley\.[0-9a-f]{16}$/);
    assert.equal(
      stickerExif({ packName: 'P', packPublisher: 'Q' }).subarray(22, 60).toString(),
      exif.subarray(22, 60).toString(),
    );
    const webp = await withExif(fixture('tiny.webp'), exif);
    assert.deepEqual(await readStickerExif(webp), json);
    assert.equal((await sharp(webp).metadata()).format, 'webp', 'still a valid WEBP');
  });

  it('keeps static stickers without metadata free of EXIF, letterboxed to 512×512 with transparency', async () => {
    const sticker = await makeSticker(
      fixture('tiny.jpg'),
      { ext: 'jpg', mime: 'image/jpeg' },
      {},
      new Ffmpeg(),
    );
    assert.equal(sticker.animated, false);
    assert.equal(await readStickerExif(sticker.data), undefined);
    const meta = await sharp(sticker.data).metadata();
    assert.deepEqual([meta.width, meta.height, meta.hasAlpha], [512, 512, true]);
  });

  it('refuses an image over the frame or pixel budget from its header, before any conversion (413)', async () => {
    const gif = { ext: 'gif', mime: 'image/gif' };
    const refused = async (data: Buffer, message: string) => {
      const started = Date.now();
      await assert.rejects(makeSticker(data, gif, {}, new Ffmpeg()), (e) => {
        assert.ok(e instanceof DomainError);
        assert.deepEqual([statusOf(e.code), e.message], [413, message]);
        return true;
      });
      assert.ok(Date.now() - started < 2_000, 'refused without converting');
    };
    // 101 one-pixel frames: 2.4 KB, far under the 500 KB input limit, one frame over the budget.
    await refused(pixelFramesGif(101, 1, 1), 'sticker must have at most 100 frames (it has 101)');
    await refused(
      pixelFramesGif(1, 6000, 6000),
      'sticker must be at most 32,000,000 pixels, width × height × frames (it has 36,000,000)',
    );
    await refused(
      pixelFramesGif(3, 4000, 4000),
      'sticker must be at most 32,000,000 pixels, width × height × frames (it has 48,000,000)',
    );
    const within = await makeSticker(pixelFramesGif(2, 1, 1), gif, {}, new Ffmpeg());
    assert.equal(within.animated, true, 'two frames are within the budget');
  });

  it('converts at most 2 stickers at once in a process; the others wait their turn', async () => {
    const releases: (() => void)[] = [];
    const holders = [0, 1].map(() =>
      stickerConversions.run(() => new Promise<void>((resolve) => releases.push(resolve))),
    );
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(stickerConversions.running, 2);
    let done = false;
    const waiting = makeSticker(
      fixture('tiny.png'),
      { ext: 'png', mime: 'image/png' },
      {},
      new Ffmpeg(),
    ).then((sticker) => {
      done = true;
      return sticker;
    });
    while (stickerConversions.waiting === 0 && !done) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(done, false, 'waits while both slots are taken');
    for (const release of releases) release();
    await Promise.all(holders);
    assert.equal((await waiting).animated, false);
    assert.deepEqual([stickerConversions.running, stickerConversions.waiting], [0, 0]);
  });

  it('answers 503 naming ffmpeg when an MP4 sticker arrives and ffmpeg is missing', async () => {
    const missing = new Ffmpeg('/nonexistent/ffmpeg');
    assert.equal(await missing.available(), false);
    await assert.rejects(
      makeSticker(fixture('sticker.mp4'), { ext: 'mp4', mime: 'video/mp4' }, {}, missing),
      (e) => {
        assert.ok(e instanceof DomainError);
        assert.equal(statusOf(e.code), 503);
        assert.match(e.message, /^animated stickers need ffmpeg, which is not installed on this server/);
        assert.match(e.message, /FFMPEG_PATH/);
        return true;
      },
    );
    assert.match(
      await missing.require().catch((e: Error) => e.message),
      /tried "\/nonexistent\/ffmpeg"\)$/,
      'a configured FFMPEG_PATH is the only binary tried',
    );
  });

  it('finds ffmpeg in order: FFMPEG_PATH alone, else the packaged binary, then ffmpeg on PATH', () => {
    assert.deepEqual(ffmpegCandidates('/opt/ffmpeg/bin/ffmpeg'), ['/opt/ffmpeg/bin/ffmpeg']);
    const packaged = packagedFfmpegPath();
    assert.deepEqual(ffmpegCandidates(undefined), packaged === undefined ? ['ffmpeg'] : [packaged, 'ffmpeg']);
    assert.deepEqual(ffmpegCandidates(''), ffmpegCandidates(undefined), 'empty means unset');
  });

  if (packagedFfmpegPath() !== undefined) {
    it('uses the packaged binary when FFMPEG_PATH is unset (no system ffmpeg needed)', async () => {
      const packaged = packagedFfmpegPath();
      assert.match(packaged ?? '', /node_modules\/@ffmpeg-installer\/[a-z0-9-]+\/ffmpeg(\.exe)?$/);
      assert.equal(await new Ffmpeg().resolve(), packaged);
    });
  }

  if (ffmpegAvailable) {
    it('refuses an MP4 ffmpeg cannot decode as 400', async () => {
      const broken = Buffer.concat([fixture('sticker.mp4').subarray(0, 64), Buffer.alloc(512)]);
      await assert.rejects(makeSticker(broken, { ext: 'mp4', mime: 'video/mp4' }, {}, new Ffmpeg()), (e) => {
        assert.ok(e instanceof DomainError);
        assert.equal(statusOf(e.code), 400);
        assert.match(e.message, /^sticker could not be converted/);
        return true;
      });
    });
  }
});
