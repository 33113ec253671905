// Reads a safetensors file (an 8-byte little-endian header length, a JSON
// header, the tensors' bytes) into {name: {dtype, shape, data}}; float
// tensors come out as Float32Array (F16 and BF16 widened), integers as
// BigInt64Array / Int32Array. Errors name the file and the problem.

function f16(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

export function parseSafetensors(buffer, name = 'safetensors') {
  if (buffer.byteLength < 8) throw new Error(`${name}: truncated (${buffer.byteLength} bytes)`);
  const dv = new DataView(buffer);
  const n = Number(dv.getBigUint64(0, true));
  if (8 + n > buffer.byteLength) throw new Error(`${name}: header of ${n} bytes runs past the end`);
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, n)));
  } catch (e) {
    throw new Error(`${name}: malformed header: ${e.message}`);
  }
  const base = 8 + n, out = {};
  for (const [key, t] of Object.entries(header)) {
    if (key === '__metadata__') continue;
    const [b, e] = t.data_offsets;
    if (!(b <= e && base + e <= buffer.byteLength)) throw new Error(`${name}: tensor '${key}' lies outside the file`);
    const bytes = buffer.slice(base + b, base + e);
    const count = t.shape.reduce((a, x) => a * x, 1);
    let data;
    if (t.dtype === 'F32') data = new Float32Array(bytes);
    else if (t.dtype === 'F16' || t.dtype === 'BF16') {
      const u = new Uint16Array(bytes);
      data = new Float32Array(u.length);
      const w = new Uint32Array(data.buffer);
      for (let i = 0; i < u.length; ++i) {
        if (t.dtype === 'BF16') w[i] = u[i] << 16;
        else data[i] = f16(u[i]);
      }
    } else if (t.dtype === 'I64') data = new BigInt64Array(bytes);
    else if (t.dtype === 'I32') data = new Int32Array(bytes);
    else throw new Error(`${name}: tensor '${key}' has unsupported dtype ${t.dtype}`);
    if (data.length !== count) throw new Error(`${name}: tensor '${key}' holds ${data.length} values, its shape ${count}`);
    out[key] = { dtype: t.dtype, shape: t.shape, data };
  }
  // The header's string map, kept out of the tensors' keys.
  Object.defineProperty(out, '__metadata__', { value: header.__metadata__ || {}, enumerable: false });
  return out;
}
