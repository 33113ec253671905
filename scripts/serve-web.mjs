// A static server for the page (scripts/serve-web.sh; the page test starts
// it too): the repository's web/ and models/ directories on 127.0.0.1 only,
// every response cross-origin isolated (COOP same-origin, COEP
// require-corp, CORP same-origin), so that SharedArrayBuffer and the
// pthreads build are available. Nothing outside those two directories is
// served. Usage: node scripts/serve-web.mjs [PORT] (0: any free port; the
// chosen one is printed as "listening PORT").
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { extname, join, normalize, resolve, sep, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const served = ['web', 'models'];
const types = {
  '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.wasm': 'application/wasm', '.json': 'application/json', '.css': 'text/css', '.wgsl': 'text/plain',
  '.md': 'text/plain; charset=utf-8', '.png': 'image/png',
};

export function startServer(port = 0) {
  const server = createServer((req, res) => {
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
      'Cache-Control': 'no-store',
    };
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    } catch {
      res.writeHead(400, headers).end('bad path');
      return;
    }
    if (path === '/') {
      res.writeHead(302, { ...headers, Location: '/web/' }).end();
      return;
    }
    if (path.endsWith('/')) path += 'index.html';
    const file = normalize(join(root, path));
    const top = file.slice(root.length + 1).split(sep)[0];
    if (!file.startsWith(root + sep) || !served.includes(top)) {
      res.writeHead(404, headers).end('not found');
      return;
    }
    let st;
    try {
      st = statSync(file);
    } catch {
      res.writeHead(404, headers).end('not found');
      return;
    }
    if (!st.isFile()) {
      res.writeHead(404, headers).end('not found');
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': types[extname(file)] ?? 'application/octet-stream',
      'Content-Length': st.size });
    if (req.method === 'HEAD') return res.end();
    createReadStream(file).pipe(res);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => ok(server));
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const server = await startServer(Number(process.argv[2] ?? 8765));
  const { port } = server.address();
  console.log(`listening ${port}`);
  console.log(`open http://127.0.0.1:${port}/web/`);
}
