// The page in headless Chromium (Debian's, through puppeteer-core): load the
// built-in model, generate greedily, save the session to IndexedDB, reload,
// continue it; both generations equal the native program's run of the same
// two prompts through one --session file, and the bytes the page saved
// continue natively to the same ids. A screenshot of the page after the
// generation is left at $SSM_BUILD_DIR/web-page.png. Then WSLA on pasted
// text lowers the held-out loss the page shows (web-page-adapted.png).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildDir, defaultModel, nativeGenerate, root, tempDir } from './wasm_helpers.mjs';

const chromium = process.env.SSM_CHROMIUM ?? '/usr/bin/chromium';
const first = 'And God said';
const second = ' and the earth';
const n = 24;

test('the page generates, keeps a session across a reload and continues it as the native program does',
  { timeout: 900_000 }, async () => {
    const { default: puppeteer } = await import(join(root, 'web/node_modules/puppeteer-core/lib/esm/puppeteer/puppeteer-core.js'));
    const { startServer } = await import(join(root, 'scripts/serve-web.mjs'));
    assert.ok(existsSync(chromium), `${chromium}: no chromium (scripts/install-web-deps.sh)`);
    const { dir, cleanup } = tempDir();
    const server = await startServer(0);
    const base = `http://127.0.0.1:${server.address().port}/web/?autoload`;
    const browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      userDataDir: join(dir, 'profile'),
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    try {
      const page = await browser.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.setViewport({ width: 1000, height: 1100 });
      const ready = async () => {
        await page.waitForFunction(() => document.body.dataset.ready === '1' ||
          document.getElementById('error').textContent !== '', { timeout: 300_000 });
        assert.equal(await page.$eval('#error', (e) => e.textContent), '');
      };
      const generate = async (prompt) => {
        await page.$eval('#prompt', (e, v) => { e.value = v; }, prompt);
        await page.$eval('#temperature', (e) => { e.value = '0'; });
        await page.$eval('#max-tokens', (e, v) => { e.value = v; }, String(n));
        await page.click('#generate');
        await page.waitForFunction(() => document.body.dataset.generated === '1' ||
          document.getElementById('error').textContent !== '', { timeout: 600_000 });
        assert.equal(await page.$eval('#error', (e) => e.textContent), '');
        return JSON.parse(await page.$eval('#last-result', (e) => e.textContent));
      };

      await page.goto(base);
      await ready();
      assert.equal(await page.evaluate(() => crossOriginIsolated), true);
      const a = await generate(first);
      await page.$eval('#session-name', (e) => { e.value = 'test session'; });
      await page.click('#save-session');
      await page.waitForFunction(() => document.body.dataset.saved === 'test session');
      const shot = join(buildDir, 'web-page.png');
      await page.screenshot({ path: shot, fullPage: true });
      console.log(`screenshot: ${shot}`);

      await page.reload();
      await ready();
      await page.waitForSelector('button[data-session="test session"]');
      await page.click('button[data-session="test session"]');
      await page.waitForFunction(() => document.body.dataset.restored === 'test session' ||
        document.getElementById('error').textContent !== '');
      assert.equal(await page.$eval('#error', (e) => e.textContent), '');
      const saved = await page.evaluate(() => new Promise((ok, fail) => {
        const req = indexedDB.open('ssm-sessions', 1);
        req.onsuccess = () => {
          const get = req.result.transaction('sessions').objectStore('sessions').get('test session');
          get.onsuccess = () => ok(Array.from(get.result.bytes));
          get.onerror = () => fail(get.error);
        };
        req.onerror = () => fail(req.error);
      }));
      const b = await generate(second);
      assert.deepEqual(errors, []);

      // The native program: the same two prompts through one session file.
      const file = join(dir, 'native.state');
      const greedy = ['--temperature', '0', '-n', String(n), '--session', file];
      const na = nativeGenerate(defaultModel, ['-p', first, ...greedy], a.promptIds.length);
      const nb = nativeGenerate(defaultModel, ['-p', second, ...greedy], b.promptIds.length);
      assert.deepEqual(a.promptIds, na.promptIds);
      assert.deepEqual(a.ids, na.ids);
      assert.deepEqual(b.promptIds, nb.promptIds);
      assert.deepEqual(b.ids, nb.ids);
      // The page's saved bytes continue natively to the same ids.
      const pageFile = join(dir, 'page.state');
      writeFileSync(pageFile, Uint8Array.from(saved));
      const pb = nativeGenerate(defaultModel, ['-p', second, '--temperature', '0', '-n', String(n),
        '--session', pageFile], b.promptIds.length);
      assert.deepEqual(pb.ids, b.ids);

      // WSLA on pasted text: the held-out loss the page reports falls.
      const text = readFileSync(join(root, 'docs/MATH.md'), 'utf8').slice(0, 12000);
      await page.$eval('#adapt-text', (e, v) => { e.value = v; }, text);
      await page.$eval('#adapt-steps', (e) => { e.value = '6'; });
      await page.click('#adapt');
      await page.waitForFunction(() => document.body.dataset.adapted ||
        document.getElementById('error').textContent !== '', { timeout: 600_000 });
      assert.equal(await page.$eval('#error', (e) => e.textContent), '');
      const adapted = JSON.parse(await page.evaluate(() => document.body.dataset.adapted));
      assert.ok(adapted.heldOutAfter.loss < adapted.heldOutBefore.loss, JSON.stringify(adapted));
      await page.screenshot({ path: join(buildDir, 'web-page-adapted.png'), fullPage: true });
    } finally {
      await browser.close();
      server.close();
      cleanup();
    }
  });
