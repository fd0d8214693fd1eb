/**
 * The web globals an actor may use on StarlingMonkey, the default backend (componentize-js):
 * `TextEncoder` and `TextDecoder`. The QuickJS backend (`--backend qjs`) has neither; the SDK's
 * `encodeUtf8`/`decodeUtf8` work on both. The SDK's `lib` is plain `es2022` (no DOM), so these
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
