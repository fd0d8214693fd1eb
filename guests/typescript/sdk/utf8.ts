/**
 * UTF-8 in every engine. StarlingMonkey (and Node) have `TextEncoder`/`TextDecoder`; QuickJS,
 * the default engine, has neither, so loading the SDK installs the small implementation below
 * on `globalThis` where they are absent: `new TextEncoder()` works in an actor on either
 * engine, typed by `starlingmonkey.d.ts`. It follows the WHATWG Encoding Standard for UTF-8
 * only: a lone surrogate encodes as U+FFFD, each maximal invalid subsequence decodes as one
 * U+FFFD (or throws `TypeError` when `fatal`), a leading BOM is dropped unless `ignoreBOM`, and
 * `decode(bytes, { stream: true })` keeps an incomplete trailing sequence for the next call.
 */

const REPLACEMENT = 0xfffd;
/** Code units per `String.fromCharCode` call (far below any engine's argument limit). */
const CHUNK = 4096;

/** The number of bytes `s` takes as UTF-8 (a lone surrogate counts as U+FFFD, 3 bytes). */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c < 0xe000;
}

/**
 * Writes `s` as UTF-8 into `dest` from offset 0, stopping before a character that does not fit
 * whole: `read` UTF-16 code units consumed, `written` bytes (`TextEncoder.encodeInto`).
 */
export function encodeIntoJs(s: string, dest: Uint8Array): { read: number; written: number } {
  let w = 0;
  let i = 0;
  const cap = dest.length;
  for (; i < s.length; i++) {
    let c = s.charCodeAt(i);
    let units = 1;
    if (c >= 0xd800 && c < 0xe000) {
      if (c < 0xdc00 && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) {
        c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(i + 1) - 0xdc00);
        units = 2;
      } else {
        c = REPLACEMENT;
      }
    }
    if (c < 0x80) {
      if (w + 1 > cap) break;
      dest[w++] = c;
    } else if (c < 0x800) {
      if (w + 2 > cap) break;
      dest[w++] = 0xc0 | (c >> 6);
      dest[w++] = 0x80 | (c & 63);
    } else if (c < 0x10000) {
      if (w + 3 > cap) break;
      dest[w++] = 0xe0 | (c >> 12);
      dest[w++] = 0x80 | ((c >> 6) & 63);
      dest[w++] = 0x80 | (c & 63);
    } else {
      if (w + 4 > cap) break;
      dest[w++] = 0xf0 | (c >> 18);
      dest[w++] = 0x80 | ((c >> 12) & 63);
      dest[w++] = 0x80 | ((c >> 6) & 63);
      dest[w++] = 0x80 | (c & 63);
    }
    i += units - 1;
  }
  return { read: i, written: w };
}

/** `s` as UTF-8 bytes, one exact-size allocation (the pure-JS `TextEncoder.encode`). */
export function encodeUtf8Js(s: string): Uint8Array {
  const out = new Uint8Array(utf8Length(s));
  encodeIntoJs(s, out);
  return out;
}

/**
 * Decodes `b[start..]`. Returns the text and where decoding stopped: `b.length`, or, when
 * `stream` is set, the start of an incomplete sequence at the end (kept for the next chunk).
 */
function decodeFrom(b: Uint8Array, start: number, fatal: boolean, stream: boolean): [string, number] {
  let out = "";
  const units: number[] = [];
  const end = b.length;
  let i = start;
  const bad = (): void => {
    if (fatal) throw new TypeError("The encoded data was not valid utf-8");
    units.push(REPLACEMENT);
  };
  while (i < end) {
    if (units.length >= CHUNK) {
      out += String.fromCharCode.apply(null, units);
      units.length = 0;
    }
    const b0 = b[i];
    if (b0 < 0x80) {
      units.push(b0);
      i++;
      continue;
    }
    let need: number;
    let cp: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      need = 1;
      cp = b0 & 0x1f;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      need = 2;
      cp = b0 & 0x0f;
      if (b0 === 0xe0) lo = 0xa0;
      if (b0 === 0xed) hi = 0x9f; // no encoded surrogates
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      need = 3;
      cp = b0 & 0x07;
      if (b0 === 0xf0) lo = 0x90; // no overlong 4-byte forms
      if (b0 === 0xf4) hi = 0x8f; // nothing above U+10FFFF
    } else {
      bad();
      i++;
      continue;
    }
    let j = i + 1;
    let ok = true;
    for (let k = 0; k < need; k++, j++) {
      if (j >= end) {
        if (stream) return [out + String.fromCharCode.apply(null, units), i];
        ok = false;
        break;
      }
      const bk = b[j];
      if (bk < lo || bk > hi) {
        ok = false;
        break;
      }
      lo = 0x80;
      hi = 0xbf;
      cp = (cp << 6) | (bk & 0x3f);
    }
    if (!ok) {
      // One U+FFFD for the maximal subpart; the byte that broke it starts the next character.
      bad();
      i = j;
      continue;
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      units.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      units.push(cp);
    }
    i = j;
  }
  return [out + String.fromCharCode.apply(null, units), end];
}

/** UTF-8 bytes as text, invalid sequences replaced, a leading BOM dropped (the pure-JS
 * `new TextDecoder().decode`). */
export function decodeUtf8Js(b: Uint8Array): string {
  const text = decodeFrom(b, 0, false, false)[0];
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

type BufferInput = ArrayBufferLike | ArrayBufferView;

function bytesOf(input: BufferInput | undefined): Uint8Array {
  if (input === undefined || input === null) return new Uint8Array(0);
  if (input instanceof Uint8Array) return input;
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  return new Uint8Array(input as ArrayBufferLike);
}

/** `TextEncoder` for engines without one (UTF-8 is its only encoding). */
export class Utf8Encoder {
  get encoding(): string {
    return "utf-8";
  }

  encode(input: string = ""): Uint8Array<ArrayBuffer> {
    return encodeUtf8Js(String(input)) as Uint8Array<ArrayBuffer>;
  }

  encodeInto(source: string, destination: Uint8Array): { read: number; written: number } {
    return encodeIntoJs(String(source), destination);
  }
}

const UTF8_LABELS = ["utf-8", "utf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"];

/** `TextDecoder` for engines without one: UTF-8 only; other labels throw `RangeError`. */
export class Utf8Decoder {
  readonly fatal: boolean;
  readonly ignoreBOM: boolean;
  #pending: Uint8Array = new Uint8Array(0);
  #bomChecked = false;

  constructor(label: string = "utf-8", options: { fatal?: boolean; ignoreBOM?: boolean } = {}) {
    if (!UTF8_LABELS.includes(String(label).trim().toLowerCase())) {
      throw new RangeError(`The "${label}" encoding is not supported (only utf-8 is)`);
    }
    this.fatal = Boolean(options?.fatal);
    this.ignoreBOM = Boolean(options?.ignoreBOM);
  }

  get encoding(): string {
    return "utf-8";
  }

  decode(input?: BufferInput, options?: { stream?: boolean }): string {
    const stream = Boolean(options?.stream);
    let bytes = bytesOf(input);
    if (this.#pending.length) {
      const joined = new Uint8Array(this.#pending.length + bytes.length);
      joined.set(this.#pending);
      joined.set(bytes, this.#pending.length);
      bytes = joined;
    }
    let text: string;
    let stop: number;
    try {
      [text, stop] = decodeFrom(bytes, 0, this.fatal, stream);
    } catch (e) {
      this.#reset();
      throw e;
    }
    this.#pending = stop < bytes.length ? bytes.slice(stop) : new Uint8Array(0);
    if (!this.#bomChecked && text.length) {
      this.#bomChecked = true;
      if (!this.ignoreBOM && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (!stream) this.#reset();
    return text;
  }

  #reset(): void {
    this.#pending = new Uint8Array(0);
    this.#bomChecked = false;
  }
}

/**
 * Puts [`Utf8Encoder`] and [`Utf8Decoder`] on `g` as `TextEncoder`/`TextDecoder` where `g` has
 * none; an engine's own are kept. Runs once when the SDK loads.
 */
export function installTextCodecs(g: Record<string, unknown> = globalThis as unknown as Record<string, unknown>): void {
  if (typeof g.TextEncoder !== "function") g.TextEncoder = Utf8Encoder;
  if (typeof g.TextDecoder !== "function") g.TextDecoder = Utf8Decoder;
}

installTextCodecs();

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `s` as UTF-8 (the engine's `TextEncoder`, or the SDK's where it has none). */
export function encodeUtf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** UTF-8 bytes as text, invalid sequences replaced by U+FFFD. */
export function decodeUtf8(b: Uint8Array): string {
  return decoder.decode(b);
}
