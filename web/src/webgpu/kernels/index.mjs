// Every kernel by name, each a complete WGSL module: the common header, then
// the kernel's bindings and entry point `main`.
import { HEADER } from './common.mjs';
import * as basic from './basic.mjs';
import * as mamba2 from './mamba2.mjs';
import * as mamba3 from './mamba3.mjs';
import * as attention from './attention.mjs';
import * as sample from './sample.mjs';

const KERNELS = { ...basic, ...mamba2, ...mamba3, ...attention, ...sample };

export function kernelSource(name) {
  const body = KERNELS[name];
  if (typeof body !== 'string') throw new Error(`webgpu: no kernel '${name}'`);
  return HEADER + body;
}

export const kernelNames = Object.keys(KERNELS).filter((k) => typeof KERNELS[k] === 'string');
