/**
 * `TextEncoder` and `TextDecoder`, which an actor may use on either engine: StarlingMonkey has
 * its own, and on QuickJS (the default engine, which has neither) the SDK installs its UTF-8
 * implementation (`utf8.ts`) on `globalThis`. The SDK's `lib` is plain `es2022` (no DOM), so these
 * are declared here, in the same shape as TypeScript's `lib.dom.d.ts`: an actor whose own
 * tsconfig adds the DOM or WebWorker lib merges with them instead of clashing.
 */

interface TextEncoderCommon {
  readonly encoding: string;
}

interface TextEncoderEncodeIntoResult {
  read: number;
  written: number;
}

interface TextEncoder extends TextEncoderCommon {
  encode(input?: string): Uint8Array<ArrayBuffer>;
  encodeInto(source: string, destination: Uint8Array<ArrayBufferLike>): TextEncoderEncodeIntoResult;
}

declare var TextEncoder: {
  prototype: TextEncoder;
  new (): TextEncoder;
};

interface TextDecoderCommon {
  readonly encoding: string;
  readonly fatal: boolean;
  readonly ignoreBOM: boolean;
}

interface TextDecoderOptions {
  fatal?: boolean;
  ignoreBOM?: boolean;
}

interface TextDecodeOptions {
  stream?: boolean;
}

interface TextDecoder extends TextDecoderCommon {
  decode(input?: ArrayBufferLike | ArrayBufferView<ArrayBufferLike>, options?: TextDecodeOptions): string;
}

declare var TextDecoder: {
  prototype: TextDecoder;
  new (label?: string, options?: TextDecoderOptions): TextDecoder;
};
