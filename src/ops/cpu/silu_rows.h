// SiLU, x / (1 + exp(-x)), over a run of floats in place, vectorised
// (Highway, chosen at run time for the CPU). Every element gets the same
// lane-wise arithmetic wherever it sits in the run, so a value computed in a
// long run (prefill) equals the one computed alone (a decode step) to the
// last bit.
#pragma once

#include <cstdint>

namespace ssm::cpu {

void silu_in_place(float* v, int64_t n);

}  // namespace ssm::cpu
