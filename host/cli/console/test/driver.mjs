// Drives a real headless Chromium (Debian's /usr/bin/chromium, never a downloaded browser)
// for tests/tests/console.rs: one JSON command per stdin line, one JSON answer per stdout
// line. The Rust test holds the scenario and the assertions; this only operates the page.
//
// Commands: {"cmd":"open","url","user"?,"password"?}        -> {"status"} (401: challenged, no credentials)
//           {"cmd":"text","sel"}                            -> {"text"}
//           {"cmd":"wait_text","sel","re","timeout_ms"}     -> {"text"} (first match of re)
//           {"cmd":"wait_gone","sel","timeout_ms"}          -> {}
//           {"cmd":"attr","sel","name"}                     -> {"value"}
//           {"cmd":"fill","sel","value"}                    -> {}
//           {"cmd":"click","sel","confirm":true|false}      -> {"dialog"} (the confirm text)
//           {"cmd":"screenshot","path","full_page"?}        -> {} (full page unless false)
//           {"cmd":"painted","sel"}                         -> {"pixels","top"} (of the first canvas
//                                                              in sel: painted pixels, and the highest
//                                                              painted row as a fraction of the height,
//                                                              0 = top, null when blank)
//           {"cmd":"close"}                                 -> {}
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const profile = mkdtempSync(join(tmpdir(), 'sluice-console-chromium-'));
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
let context = null;
let page = null;
let dialogAnswer = true;
let lastDialog = null;
const pageErrors = [];

async function open({ url, user, password }) {
  if (context) await context.close();
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ARGS,
    viewport: { width: 1400, height: 1000 },
    httpCredentials: user !== undefined ? { username: user, password } : undefined,
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('dialog', async (d) => {
    lastDialog = d.message();
    if (dialogAnswer) await d.accept();
    else await d.dismiss();
  });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text());
  });
  try {
    const resp = await page.goto(url, { waitUntil: 'load' });
    return { status: resp ? resp.status() : null };
  } catch (e) {
    // Chromium ends a navigation answered by a 401 challenge it has no credentials for.
    if (String(e).includes('net::ERR_INVALID_AUTH_CREDENTIALS')) return { status: 401 };
    throw e;
  }
}

async function waitText({ sel, re, timeout_ms }) {
  const pattern = new RegExp(re);
  const deadline = Date.now() + (timeout_ms ?? 30000);
  let last = null;
  for (;;) {
    const loc = page.locator(sel);
    last = (await loc.count()) > 0 ? await loc.first().textContent() : null;
    if (last !== null && pattern.test(last)) return { text: last };
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout_ms} ms waiting for ${sel} to match /${re}/; last text: ${JSON.stringify(last)}; page errors: ${JSON.stringify(pageErrors)}`);
    }
    await page.waitForTimeout(100);
  }
}

const handlers = {
  open,
  text: async ({ sel }) => ({ text: await page.locator(sel).first().textContent({ timeout: 10000 }) }),
  wait_text: waitText,
  wait_gone: async ({ sel, timeout_ms }) => {
    await page.locator(sel).first().waitFor({ state: 'detached', timeout: timeout_ms ?? 30000 });
    return {};
  },
  attr: async ({ sel, name }) => ({ value: await page.locator(sel).first().getAttribute(name, { timeout: 10000 }) }),
  fill: async ({ sel, value }) => {
    await page.locator(sel).first().fill(value);
    await page.locator(sel).first().dispatchEvent('change');
    return {};
  },
  click: async ({ sel, confirm }) => {
    dialogAnswer = confirm !== false;
    lastDialog = null;
    await page.locator(sel).first().click({ timeout: 10000 });
    // The confirm dialog opens synchronously inside the click handler.
    return { dialog: lastDialog };
  },
  screenshot: async ({ path, full_page }) => {
    await page.screenshot({ path, fullPage: full_page !== false });
    return {};
  },
  painted: async ({ sel }) =>
    page.locator(`${sel} canvas`).first().evaluate((c) => {
      const { data } = c.getContext('2d').getImageData(0, 0, c.width, c.height);
      let pixels = 0;
      let top = null;
      for (let i = 3; i < data.length; i += 4) {
        if (data[i] === 0) continue;
        pixels += 1;
        if (top === null) top = Math.floor((i - 3) / 4 / c.width) / c.height;
      }
      return { pixels, top };
    }, undefined, { timeout: 10000 }),
  errors: async () => ({ errors: pageErrors }),
  close: async () => {
    if (context) await context.close();
    context = null;
    return {};
  },
};

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    const msg = JSON.parse(line);
    const h = handlers[msg.cmd];
    if (!h) throw new Error(`unknown command ${msg.cmd}`);
    answer = { ok: true, ...(await h(msg)) };
  } catch (e) {
    answer = { ok: false, error: String(e && e.stack ? e.stack : e) };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
  if (answer.ok && JSON.parse(line).cmd === 'close') break;
}
if (context) await context.close();
rmSync(profile, { recursive: true, force: true });
