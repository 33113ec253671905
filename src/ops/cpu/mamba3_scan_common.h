// What the cpu Mamba-3 scan and its backward share: the scan's arguments as
// raw pointers with their shape letters, and the decay weight.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/cpu/mamba3_workspace.h"
#include "ops/cpu/x86_kernels.h"
#include "ssm/ops/mamba3.h"

namespace ssm::cpu::m3 {

struct ScanView {
  int64_t B, H, L, R, N, P;
  const float *q, *k, *v, *dt, *A, *lam;
  const float* D;  // null: no skip term
  float* o;        // null in the backward
  // The starting state: null for a fresh sequence (backward), or updated in
  // place (forward, which points a fresh sequence at zeros from the arena).
  float *ssm, *k_prev, *v_prev;
  // A BF16 state instead of ssm (ssm null): only the step (L = 1) takes one,
  // reading and rounding it in place; ops::mamba3_scan widens it into F32
  // workspace around a chunked scan.
  uint16_t* ssm16 = nullptr;
  // The chunked forward's state products with BF16 inputs (only where the
  // arguments allow it and the CPU has AVX-512 BF16; never in the backward).
  bool bf16_products = false;

  explicit ScanView(const ops::Mamba3ScanArgs& a)
      : B(a.q.dim(0)),
        H(a.q.dim(1)),
        L(a.q.dim(2)),
        R(a.q.dim(3)),
        N(a.q.dim(4)),
        P(a.v.dim(4)),
        q(a.q.data<float>()),
        k(a.k.data<float>()),
        v(a.v.data<float>()),
        dt(a.dt.data<float>()),
        A(a.A.data<float>()),
        lam(a.lam.data<float>()),
        D(in_or_null(a.D)),
        o(out_or_null(a.o)),
        ssm(a.ssm.defined() && a.ssm.dtype() == DType::kBF16 ? nullptr : out_or_null(a.ssm)),
        k_prev(out_or_null(a.k_prev)),
        v_prev(out_or_null(a.v_prev)),
        ssm16(a.ssm.defined() && a.ssm.dtype() == DType::kBF16
                  ? static_cast<uint16_t*>(const_cast<void*>(a.ssm.raw()))
                  : nullptr) {}

  // The forward's view: a fresh sequence's state is zeros, dropped afterwards.
  ScanView(Context& ctx, const ops::Mamba3ScanArgs& a) : ScanView(a) {
    bf16_products = a.bf16_state_products && cpu_has_avx512() && cpu_bf16_dot_products_fast();
    if (ssm || ssm16) return;
    ssm = out(ctx.arena().zeros(DType::kF32, {B, H, P, N}));
    k_prev = out(ctx.arena().zeros(DType::kF32, {B, H, R, N}));
    v_prev = out(ctx.arena().zeros(DType::kF32, {B, H, R, P}));
  }
};

// exp of a log-decay (always <= 0), flushed to zero below e^-80 (still a
// normal float): such a weight cannot matter next to terms of order one, and
// the subnormal products it would feed are slow on some CPUs.
inline float decay_weight(float log_decay) { return log_decay < -80.f ? 0.f : std::exp(log_decay); }
inline float decay_weight(double log_decay) {
  return log_decay < -80.0 ? 0.f : static_cast<float>(std::exp(log_decay));
}

// The recurrence one step at a time, in fp32 (the decode path, L = 1; any
// L works): the L steps of (batch row, head) i, its state updated in place
// (mamba3_scan.cpp). Allocates nothing.
void step_head(const ScanView& a, int64_t i);

}  // namespace ssm::cpu::m3
