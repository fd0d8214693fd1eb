// The SDK's UTF-8 codec (installed as TextEncoder/TextDecoder where the engine has none, as on
// QuickJS) against Node's own, on valid text, lone surrogates, invalid and truncated bytes,
// BOMs and streamed chunks.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Utf8Decoder, Utf8Encoder, decodeUtf8Js, encodeIntoJs, encodeUtf8Js, installTextCodecs, utf8Length,
} from "../sdk/utf8.ts";

const TEXTS = [
  "", "ascii only", "héllo ✓ 𝄞 \u0000 end", "\u007f\u0080\u07ff\u0800\uffff", "\u{10000}\u{10ffff}",
  "😀👍🏽 family 👨‍👩‍👧", "lone high \ud800 x", "lone low \udc00 x", "end high \ud83d", "\udc00\ud800 reversed",
  "\ufeffBOM first", "日本語のテキスト", "x".repeat(10_000) + "é".repeat(5_000),
];

// Every interesting byte sequence: valid forms at each boundary, overlongs, surrogates, values
// above U+10FFFF, stray continuation bytes, truncated sequences at the end and in the middle.
const BYTES: number[][] = [
  [0x61], [0xc2, 0x80], [0xdf, 0xbf], [0xe0, 0xa0, 0x80], [0xef, 0xbf, 0xbf], [0xf0, 0x90, 0x80, 0x80],
  [0xf4, 0x8f, 0xbf, 0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xe0, 0x9f, 0xbf],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf0, 0x80, 0x80, 0x80], [0xf0, 0x8f, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xff], [0xfe], [0x80], [0xbf, 0x61],
  [0xc2], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0x61, 0xe2, 0x82, 0x61], [0xf0, 0x9f, 0x61, 0x62],
  [0xe2, 0x28, 0xa1], [0xef, 0xbb, 0xbf, 0x61], [0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf], [0xef, 0xbb],
  [0xed, 0x9f, 0xbf], [0xee, 0x80, 0x80], [0xf1, 0x80, 0x80, 0x80], [0xc2, 0xc2, 0x80],
];

function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

const native = { enc: new TextEncoder(), dec: new TextDecoder() };

test("the encoder gives Node's bytes for every text, lone surrogates as U+FFFD", () => {
  const ours = new Utf8Encoder();
  for (const s of TEXTS) {
    assert.deepEqual(ours.encode(s), native.enc.encode(s), JSON.stringify(s.slice(0, 40)));
    assert.equal(utf8Length(s), native.enc.encode(s).length);
  }
  assert.deepEqual(ours.encode(), native.enc.encode());
  assert.equal(ours.encoding, "utf-8");
});

test("encodeInto stops where Node's does, never splitting a character", () => {
  for (const s of ["a€𝄞b", "é\ud800z", "𝄞𝄞𝄞"]) {
    for (let cap = 0; cap <= 12; cap++) {
      const a = new Uint8Array(cap);
      const b = new Uint8Array(cap);
      assert.deepEqual(encodeIntoJs(s, a), native.enc.encodeInto(s, b), `${s} into ${cap}`);
      assert.deepEqual(a, b);
    }
  }
});

test("the decoder gives Node's text for valid, invalid and truncated bytes", () => {
  const ours = new Utf8Decoder();
  for (const b of BYTES) {
    const u = Uint8Array.from(b);
    assert.equal(ours.decode(u), native.dec.decode(u), b.map((x) => x.toString(16)).join(" "));
  }
  for (const s of TEXTS) assert.equal(decodeUtf8Js(native.enc.encode(s)), native.dec.decode(native.enc.encode(s)));
  const next = random(17);
  for (let n = 0; n < 2000; n++) {
    const u = Uint8Array.from({ length: Math.floor(next() * 12) }, () => Math.floor(next() * 256));
    assert.equal(ours.decode(u), native.dec.decode(u), Array.from(u).join(","));
  }
});

test("fatal decoding throws TypeError where Node's does, and decodes the rest alike", () => {
  const ours = new Utf8Decoder("utf-8", { fatal: true });
  const theirs = new TextDecoder("utf-8", { fatal: true });
  for (const b of BYTES) {
    const u = Uint8Array.from(b);
    let want: string | Error;
    try { want = theirs.decode(u); } catch (e) { want = e as Error; }
    if (typeof want === "string") assert.equal(ours.decode(u), want);
    else assert.throws(() => ours.decode(u), TypeError);
  }
});

test("BOM handling and streaming match Node's, chunked at every split", () => {
  const streams = [
    [0xef, 0xbb, 0xbf, 0x61, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0x62],
    [0xe2, 0x82, 0xf0, 0x9f, 0x98, 0xc2],
    [0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf],
  ];
  for (const ignoreBOM of [false, true]) {
    for (const s of streams) {
      for (let cut = 0; cut <= s.length; cut++) {
        const ours = new Utf8Decoder("utf8", { ignoreBOM });
        const theirs = new TextDecoder("utf-8", { ignoreBOM });
        const a = Uint8Array.from(s.slice(0, cut));
        const b = Uint8Array.from(s.slice(cut));
        const got = ours.decode(a, { stream: true }) + ours.decode(b);
        const want = theirs.decode(a, { stream: true }) + theirs.decode(b);
        assert.equal(got, want, `ignoreBOM=${ignoreBOM} cut=${cut} of ${s}`);
        // The decoder is reusable after a non-stream call.
        assert.equal(ours.decode(Uint8Array.from(s)), theirs.decode(Uint8Array.from(s)));
      }
    }
  }
});

test("the decoder takes any buffer source; only UTF-8 labels are accepted", () => {
  const bytes = native.enc.encode("hé𝄞");
  const ours = new Utf8Decoder();
  assert.equal(ours.decode(bytes.buffer), "hé𝄞");
  assert.equal(ours.decode(new DataView(bytes.buffer)), "hé𝄞");
  assert.equal(ours.decode(new Uint8Array(bytes.buffer, 1, 2)), "é");
  assert.equal(ours.decode(), "");
  assert.equal(ours.encoding, "utf-8");
  assert.equal(new Utf8Decoder(" UTF-8 ").encoding, "utf-8");
  assert.throws(() => new Utf8Decoder("latin1"), RangeError);
  assert.deepEqual(encodeUtf8Js("hé𝄞"), bytes);
});

test("installTextCodecs fills in only what is missing", () => {
  const bare: Record<string, unknown> = {};
  installTextCodecs(bare);
  assert.equal(bare.TextEncoder, Utf8Encoder);
  assert.equal(bare.TextDecoder, Utf8Decoder);
  const withOwn: Record<string, unknown> = { TextEncoder, TextDecoder };
  installTextCodecs(withOwn);
  assert.equal(withOwn.TextEncoder, TextEncoder);
  assert.equal(withOwn.TextDecoder, TextDecoder);
  // Node has its own, so loading the SDK kept them.
  assert.equal(globalThis.TextEncoder, TextEncoder);
});
