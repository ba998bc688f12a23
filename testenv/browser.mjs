// The node side of testenv.RunBrowser: reads a JSON job on stdin, runs its steps in a fresh
// headless Chromium with playwright-core, and writes one JSON result on stdout. Node's own
// messages and Chromium's go to stderr, which the Go side logs when a session fails.
//
// Job:    {playwright, executablePath, userDataDir, failScreenshot, stepTimeoutMs, steps: [BrowserStep]}
// Result: {texts, console, failed, error?: {step, message, url, text, screenshot}}
import { createRequire } from 'node:module';
import path from 'node:path';

const job = JSON.parse(await readStdin());
const require = createRequire(path.join(job.playwright, 'package.json'));
const { chromium } = require(job.playwright);

const result = { texts: [], console: [], failed: [] };
let context;
try {
  // A persistent context in a fresh directory: the profile starts empty, and Chromium writes
  // nothing outside the test's temporary directory.
  context = await chromium.launchPersistentContext(job.userDataDir, {
    executablePath: job.executablePath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    // The network of a test machine is closed: nothing may wait on a call home.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(job.stepTimeoutMs);
  page.setDefaultNavigationTimeout(job.stepTimeoutMs);
  watch(page);
  await runSteps(page);
} catch (err) {
  result.error ??= { step: -1, message: String(err?.stack ?? err) };
} finally {
  if (context) await context.close().catch((err) => console.error('close chromium:', err));
}
process.stdout.write(JSON.stringify(result));

// watch records what the page reports that a test wants to see fail: console warnings and
// errors (Content-Security-Policy violations among them), uncaught errors and failed requests.
function watch(page) {
  page.on('console', (msg) => {
    if (msg.type() !== 'warning' && msg.type() !== 'error') return;
    const where = msg.location()?.url;
    // Chromium asks for /favicon.ico by itself when a page names no icon; that the server has
    // none is no fault of the page, so a failure to load /favicon.ico is not reported here.
    if (where?.endsWith('/favicon.ico') && msg.text().startsWith('Failed to load resource')) return;
    result.console.push(`${msg.type()}: ${msg.text()}${where ? ` (${where})` : ''}`);
  });
  page.on('pageerror', (err) => result.console.push(`pageerror: ${err.message}`));
  page.on('requestfailed', (req) => {
    result.failed.push(`${req.method()} ${req.url()} ${req.failure()?.errorText ?? 'failed'}`);
  });
  page.on('response', (res) => {
    if (res.status() >= 400) result.failed.push(`${res.request().method()} ${res.url()} ${res.status()}`);
  });
}

async function runSteps(page) {
  for (const [i, step] of job.steps.entries()) {
    try {
      await runStep(page, step);
    } catch (err) {
      result.error = { step: i, message: String(err?.message ?? err), url: page.url() };
      result.error.text = await page
        .evaluate(() => document.body?.innerText ?? '')
        .catch((e) => `(cannot read the page: ${e.message})`);
      await page
        .screenshot({ path: job.failScreenshot, fullPage: true, timeout: 10000 })
        .then(() => (result.error.screenshot = job.failScreenshot))
        .catch((e) => console.error('failure screenshot:', e));
      return;
    }
  }
  // A last round trip through the page: the events the page sent before it (console messages
  // of the last step) have arrived once it returns.
  await page.evaluate('0');
}

async function runStep(page, step) {
  if (step.Goto) {
    await page.goto(step.Goto, { waitUntil: 'load' });
  } else if (step.Fill) {
    await page.locator(step.Fill).first().fill(step.Value ?? '');
  } else if (step.Click) {
    await page.locator(step.Click).first().click();
  } else if (step.WaitText) {
    await waitBody(page, step.WaitText, true);
  } else if (step.WaitGone) {
    await waitBody(page, step.WaitGone, false);
  } else if (step.Text) {
    const el = page.locator(step.Text).first();
    result.texts.push((await el.count()) > 0 ? await el.innerText() : '');
  } else if (step.Screenshot) {
    await page.screenshot({ path: step.Screenshot, fullPage: true });
  } else if (step.Eval) {
    const value = await page.evaluate(step.Eval);
    result.texts.push(JSON.stringify(value) ?? 'undefined');
  } else {
    throw new Error(`step has no action: ${JSON.stringify(step)}`);
  }
}

// waitBody waits until document.body's innerText contains text (present) or no longer does.
// Polling with evaluate, not waitForFunction, works under any Content-Security-Policy.
async function waitBody(page, text, present) {
  const deadline = Date.now() + job.stepTimeoutMs;
  let body = '';
  for (;;) {
    body = await page.evaluate(() => document.body?.innerText ?? '').catch(() => body);
    if (body.includes(text) === present) return;
    if (Date.now() > deadline) {
      throw new Error(`${present ? 'text never appeared' : 'text never went away'} within ${job.stepTimeoutMs} ms: ${JSON.stringify(text)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}
