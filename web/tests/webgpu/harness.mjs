// Runs code in a page of headless Chromium with WebGPU on the CPU
// (SwiftShader): a static server on 127.0.0.1 (a secure context, so
// navigator.gpu exists) serves the repository root, and puppeteer-core
// drives the system's /usr/bin/chromium (never a downloaded browser).
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const TYPES = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.html': 'text/html', '.json': 'application/json' };

// Serves REPO, and the folder `extra` (when given) under /extra/.
function serve(extra) {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = url.startsWith('/extra/') && extra ? path.join(extra, url.slice(7)) : path.join(REPO, url);
    const root = url.startsWith('/extra/') && extra ? extra : REPO;
    if (!file.startsWith(root) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404);
      res.end(`not found: ${url}`);
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream', 'cache-control': 'no-store' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// Flags checked with Chromium 156: WebGPU through SwiftShader works with the
// GPU process sandbox off; --disable-gpu does not turn WebGPU off there.
export const CHROMIUM_FLAGS = [
  '--no-sandbox', '--disable-gpu-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader',
];

export async function openPage({ extra = null } = {}) {
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(executablePath)) throw new Error(`no Chromium at ${executablePath} (set CHROMIUM)`);
  const server = await serve(extra);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ssm-webgpu-'));
  const browser = await puppeteer.launch({ executablePath, headless: true, userDataDir: profile, args: CHROMIUM_FLAGS,
    protocolTimeout: 900_000 });
  const page = await browser.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${server.address().port}/web/tests/webgpu/page.html`);
  const close = async () => {
    await browser.close();
    server.close();
    fs.rmSync(profile, { recursive: true, force: true });
  };
  return { page, close, errors };
}
