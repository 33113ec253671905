// Vector loads and stores of a row's last, partial vector, for the
// per-target kernel files (included inside their HWY_NAMESPACE, once per
// target, as Highway's -inl.h headers are).
#if defined(SSM_OPS_CPU_PARTIAL_VECTORS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SSM_OPS_CPU_PARTIAL_VECTORS_INL_H_
#undef SSM_OPS_CPU_PARTIAL_VECTORS_INL_H_
#else
#define SSM_OPS_CPU_PARTIAL_VECTORS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace ssm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A vector of v[0, count), zeros past count (count <= the lanes). The
// partial case goes through a zeroed buffer: a full load would read past
// the row's end.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> load_part(D d, const T* v, int64_t count) {
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::LoadU(d, v);
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
  std::memcpy(buf, v, static_cast<size_t>(count) * sizeof(T));
  return hn::Load(d, buf);
}

// The first count lanes of x into v[0, count).
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void store_part(D d, hn::Vec<D> x, T* v, int64_t count) {
  if (count == static_cast<int64_t>(hn::Lanes(d))) return hn::StoreU(x, d, v);
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(x, d, buf);
  std::memcpy(v, buf, static_cast<size_t>(count) * sizeof(T));
}

}  // namespace ssm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SSM_OPS_CPU_PARTIAL_VECTORS_INL_H_
