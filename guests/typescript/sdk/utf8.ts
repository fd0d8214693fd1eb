/** UTF-8 without `TextEncoder` (the QuickJS backend has none). */

const g = globalThis as any;
const enc: { encode(s: string): Uint8Array } | null = g.TextEncoder ? new g.TextEncoder() : null;
const dec: { decode(b: Uint8Array): string } | null = g.TextDecoder ? new g.TextDecoder() : null;

export function encodeUtf8(s: string): Uint8Array {
  return enc ? enc.encode(s) : encodeUtf8Js(s);
}

export function decodeUtf8(b: Uint8Array): string {
  return dec ? dec.decode(b) : decodeUtf8Js(b);
}

/** The pure-JS encoder used where `TextEncoder` is missing (exported for tests). */
export function encodeUtf8Js(s: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}

/** The pure-JS decoder used where `TextDecoder` is missing (exported for tests). */
export function decodeUtf8Js(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length;) {
    const c = b[i++];
    let cp: number;
    if (c < 0x80) cp = c;
    else if (c < 0xe0) cp = ((c & 31) << 6) | (b[i++] & 63);
    else if (c < 0xf0) cp = ((c & 15) << 12) | ((b[i++] & 63) << 6) | (b[i++] & 63);
    else cp = ((c & 7) << 18) | ((b[i++] & 63) << 12) | ((b[i++] & 63) << 6) | (b[i++] & 63);
    s += String.fromCodePoint(cp);
  }
  return s;
}
