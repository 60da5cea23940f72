/**
 * A pairing code drawn as the QR image the phone scans: a PNG `data:image/png;base64,…` URL, 264 px wide with a
 * 2-module margin and error correction level L (the code is shown on a screen, not printed). `qrcode` is imported at
 * the first code drawn (docs/decisions/0068-engines-loaded-on-first-use.md).
 * @param code the pairing attempt's code as the engine gives it (docs/decisions/0016-session-lifecycle.md).
 */
export async function qrCodeDataUrl(code: string): Promise<string> {
  const { toDataURL } = await import('qrcode');
  return toDataURL(code, { errorCorrectionLevel: 'L', margin: 2, width: 264 });
}
