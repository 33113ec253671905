// The thin layer between the WebGPU API and the kernels: buffers, one
// compute pipeline per kernel (compiled once), and a recorder that batches a
// forward's dispatches and copies into one submission.
//
// Every kernel reads its scalar parameters from a uniform block of 32 u32
// words (floats stored as their bits) at binding 0 and its buffers at
// bindings 1..n, so one generic dispatch call drives them all. The
// parameters of every dispatch of a submission share one uniform buffer, each
// at its own 256-byte-aligned offset.

import { kernelSource } from './kernels/index.mjs';

const PARAM_WORDS = 32;
const PARAM_STRIDE = 256;  // minUniformBufferOffsetAlignment on every adapter
export const WG = 64;  // threads per workgroup of the 1-D kernels

export async function requestGpuDevice() {
  if (typeof navigator === 'undefined' || !navigator.gpu) throw new Error('webgpu: this browser has no WebGPU (navigator.gpu)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('webgpu: no WebGPU adapter');
  const lim = adapter.limits;
  return adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
      maxBufferSize: lim.maxBufferSize,
      maxStorageBuffersPerShaderStage: lim.maxStorageBuffersPerShaderStage,
    },
  });
}

export class Gpu {
  // maxBindingBytes: a smaller limit for the pieces of uploadRows (tests).
  constructor(device, { maxBindingBytes = Infinity } = {}) {
    this.device = device;
    this.maxBindingBytes = maxBindingBytes;
    this.pipelines = new Map();
    this.commands = [];
    this.params = new ArrayBuffer(PARAM_STRIDE * 64);
    this.paramBuffer = null;
    this.paramCount = 0;
    this.dummy = this.buffer(4);  // bound where a kernel's optional input is absent
  }

  buffer(bytes, usage = 0) {
    return this.device.createBuffer({
      size: Math.max(4, Math.ceil(bytes / 4) * 4),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST | usage,
    });
  }

  // A matrix of `rows` rows of `cols` floats as pieces of whole rows, each
  // within the device's largest storage binding (a 50k x 768 embedding is
  // larger than the 128 MiB many adapters bind): [{buf, r0, r1}].
  uploadRows(array, rows, cols) {
    const limit = Math.min(this.device.limits.maxStorageBufferBindingSize, this.maxBindingBytes);
    const per = Math.max(1, Math.floor(limit / (cols * 4)));
    const pieces = [];
    for (let r0 = 0; r0 < rows; r0 += per) {
      const r1 = Math.min(rows, r0 + per);
      pieces.push({ buf: this.upload(array.subarray(r0 * cols, r1 * cols)), r0, r1 });
    }
    return pieces;
  }

  upload(array) {
    if (array.byteLength > this.device.limits.maxStorageBufferBindingSize)
      throw new Error(`webgpu: a tensor of ${array.byteLength} bytes exceeds this device's largest storage binding (${this.device.limits.maxStorageBufferBindingSize})`);
    const buf = this.buffer(array.byteLength);
    this.device.queue.writeBuffer(buf, 0, array.buffer, array.byteOffset, array.byteLength);
    return buf;
  }

  write(buf, array, offset = 0) {
    this.device.queue.writeBuffer(buf, offset, array.buffer, array.byteOffset, array.byteLength);
  }

  // A work buffer of at least `floats` floats, reused by name between calls
  // (dispatches run in order, so a name is free again once its reader is queued).
  scratch(name, floats) {
    this.scratchBuffers = this.scratchBuffers || new Map();
    let b = this.scratchBuffers.get(name);
    if (!b || b.size < floats * 4) {
      // Not destroyed: queued commands may still reference the old one.
      b = this.buffer(Math.max(floats * 4, b ? b.size * 2 : 0));
      this.scratchBuffers.set(name, b);
    }
    return b;
  }

  zeros(floats) {
    // Fresh WebGPU buffers are zero-filled by the API.
    return this.buffer(floats * 4);
  }

  pipeline(name) {
    let p = this.pipelines.get(name);
    if (!p) {
      const module = this.device.createShaderModule({ code: kernelSource(name), label: name });
      p = this.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' }, label: name });
      this.pipelines.set(name, p);
    }
    return p;
  }

  // Queues kernel `name` over `groups` workgroups ([x, y, z] or a count of
  // 1-D threads, see threads()), with parameters `words` (numbers: integers
  // as u32, objects {f: x} as f32) and buffers bound at 1..n.
  dispatch(name, words, buffers, groups) {
    if (words.length > PARAM_WORDS) throw new Error(`webgpu: ${name}: too many parameters`);
    if (this.paramCount * PARAM_STRIDE >= this.params.byteLength) {
      const grown = new ArrayBuffer(this.params.byteLength * 2);
      new Uint8Array(grown).set(new Uint8Array(this.params));
      this.params = grown;
    }
    const at = this.paramCount++ * PARAM_STRIDE;
    const u = new Uint32Array(this.params, at, PARAM_WORDS), f = new Float32Array(this.params, at, PARAM_WORDS);
    words.forEach((w, i) => {
      if (typeof w === 'object') f[i] = w.f;
      else u[i] = w >>> 0;
    });
    this.commands.push({ kind: 'dispatch', name, at, buffers, groups });
  }

  // A 1-D dispatch of n threads in workgroups of WG, spread over x and y
  // (x is limited to 65535 workgroups); kernels rebuild the index with gid().
  threads(n) {
    const groups = Math.max(1, Math.ceil(n / WG));
    const x = Math.min(groups, 65535);
    return [x, Math.ceil(groups / x), 1];
  }

  copy(src, srcOffset, dst, dstOffset, bytes) {
    if (bytes > 0) this.commands.push({ kind: 'copy', src, srcOffset, dst, dstOffset, bytes });
  }

  // Encodes and submits everything queued since the last submit.
  submit() {
    if (this.commands.length === 0) return;
    const bytes = this.paramCount * PARAM_STRIDE;
    if (!this.paramBuffer || this.paramBuffer.size < bytes) {
      if (this.paramBuffer) this.paramBuffer.destroy();
      this.paramBuffer = this.device.createBuffer({
        size: Math.max(bytes, PARAM_STRIDE * 64),
        usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      });
    }
    this.device.queue.writeBuffer(this.paramBuffer, 0, this.params, 0, bytes);
    const enc = this.device.createCommandEncoder();
    for (const c of this.commands) {
      if (c.kind === 'copy') {
        enc.copyBufferToBuffer(c.src, c.srcOffset, c.dst, c.dstOffset, c.bytes);
        continue;
      }
      const pipe = this.pipeline(c.name);
      const entries = [{ binding: 0, resource: { buffer: this.paramBuffer, offset: c.at, size: PARAM_WORDS * 4 } }];
      c.buffers.forEach((b, i) => entries.push({ binding: i + 1, resource: { buffer: b || this.dummy } }));
      const group = this.device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries });
      const pass = enc.beginComputePass();
      pass.setPipeline(pipe);
      pass.setBindGroup(0, group);
      const g = typeof c.groups === 'number' ? this.threads(c.groups) : c.groups;
      pass.dispatchWorkgroups(g[0], g[1] || 1, g[2] || 1);
      pass.end();
    }
    this.device.queue.submit([enc.finish()]);
    this.commands = [];
    this.paramCount = 0;
  }

  // Reads `bytes` from buf (after submitting what is queued) into a new ArrayBuffer.
  async read(buf, offset = 0, bytes = buf.size - offset) {
    this.submit();
    const staging = this.device.createBuffer({ size: Math.ceil(bytes / 4) * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = this.device.createCommandEncoder();
    enc.copyBufferToBuffer(buf, offset, staging, 0, Math.ceil(bytes / 4) * 4);
    this.device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const out = staging.getMappedRange().slice(0, bytes);
    staging.unmap();
    staging.destroy();
    return out;
  }

  async readF32(buf, offset = 0, count = (buf.size - offset) / 4) {
    return new Float32Array(await this.read(buf, offset, count * 4));
  }
}
