/** The part of npm `node-webpmux` (untyped CommonJS) parley uses: load a WEBP, set its EXIF chunk, save it. */
declare module 'node-webpmux' {
  /** A WEBP image (static or animated) held in memory. */
  class Image {
    /** Parses a WEBP from bytes (or a file path). */
    load(data: Buffer | string): Promise<void>;
    /** Serialises the image; `null` as path returns the bytes. */
    save(path: null, options?: Record<string, unknown>): Promise<Buffer>;
    /** Raw EXIF chunk; setting it converts the image to the extended format. */
    exif: Buffer | undefined;
    readonly hasAnim: boolean;
    readonly width: number;
    readonly height: number;
  }
  const webpmux: { Image: typeof Image };
  export default webpmux;
}
