// The engine's session state files (src/model/state_file.cpp) in Node, for
// the tests: "SSMSTATE", u32 version, u32 header length, u64 file length,
// the JSON header, the tensors' bytes, a zlib crc32 of everything before it.

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; ++n) {
    let c = n;
    for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// {header, tensors: [{name, dtype, shape, data: number[]}]} (I64 as numbers).
export function readStateFile(buf, name = 'state file') {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (buf.toString('latin1', 0, 8) !== 'SSMSTATE') throw new Error(`${name}: no SSMSTATE magic`);
  const hlen = dv.getUint32(12, true);
  if (crc32(buf.subarray(0, buf.length - 4)) !== dv.getUint32(buf.length - 4, true)) throw new Error(`${name}: checksum mismatch`);
  const header = JSON.parse(buf.toString('utf8', 24, 24 + hlen));
  const base = 24 + hlen;
  const tensors = header.tensors.map((t) => {
    const n = t.shape.reduce((a, x) => a * x, 1);
    const at = base + t.offset;
    const data = [];
    for (let i = 0; i < n; ++i)
      data.push(t.dtype === 'I64' ? Number(dv.getBigInt64(at + 8 * i, true)) : dv.getFloat32(at + 4 * i, true));
    return { name: t.name, dtype: t.dtype, shape: t.shape, data };
  });
  return { header, tensors };
}

// A state file holding `tensors` (same names, dtypes and shapes as the
// header lists) under `header` (fingerprint, batch, position, sequences).
export function writeStateFile(header, tensors) {
  const list = [];
  let offset = 0;
  for (const t of tensors) {
    list.push({ name: t.name, dtype: t.dtype, shape: t.shape, offset });
    offset += t.data.length * (t.dtype === 'I64' ? 8 : 4);
  }
  const json = Buffer.from(JSON.stringify({ ...header, tensors: list }), 'utf8');
  const total = 24 + json.length + offset + 4;
  const out = Buffer.alloc(total);
  out.write('SSMSTATE', 0, 'latin1');
  out.writeUInt32LE(1, 8);
  out.writeUInt32LE(json.length, 12);
  out.writeBigUInt64LE(BigInt(total), 16);
  json.copy(out, 24);
  let at = 24 + json.length;
  for (const t of tensors)
    for (const v of t.data) {
      if (t.dtype === 'I64') {
        out.writeBigInt64LE(BigInt(v), at);
        at += 8;
      } else {
        out.writeFloatLE(v, at);
        at += 4;
      }
    }
  out.writeUInt32LE(crc32(out.subarray(0, total - 4)), total - 4);
  return out;
}
