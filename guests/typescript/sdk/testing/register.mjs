// `node --import @sluice/guest/testing/register --test app.test.ts` (or this file's path):
// registers the hooks that let an actor's unit tests run in Node without a host (hooks.mjs).
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);
