// Work-around (see shared toolchains notes): preview2-shim >= 0.25 no longer preopens `/`, so
// jco 1.35 cannot read WIT files ("No such file or directory (os error 44)"). Loaded with
// `node --import ./tools/preopen.mjs`, this restores the `/` preopen before jco runs.
import { _setPreopens } from "@bytecodealliance/preview2-shim/filesystem";

_setPreopens({ "/": "/" });
