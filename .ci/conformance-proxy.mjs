// Forwards every request to TARGET with "Authorization: Bearer TOKEN" added,
// as a client configured with the token would send it; Host and Origin pass
// through unchanged, so that the server's own checks see what the caller sent.
// Usage: node conformance-proxy.mjs TARGET TOKEN (prints the URL it serves).
import http from 'node:http';

const [target, token] = process.argv.slice(2);
const server = http.createServer((req, res) => {
  const up = http.request(new URL(req.url, target), {
    method: req.method,
    headers: { ...req.headers, authorization: `Bearer ${token}` },
  }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(err));
  });
  res.on('close', () => up.destroy());
  req.pipe(up);
});
server.listen(0, '127.0.0.1', () => {
  console.log(`http://localhost:${server.address().port}`);
});
