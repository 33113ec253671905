// ssm::AtomicRef: std::atomic_ref where the standard library has it, and a
// stand-in where it does not. libc++ 14, the library of Debian's emscripten
// 3.1.6 (the WebAssembly build, docs/WEB.md), lacks atomic_ref (libc++ 19
// added it). The stand-in has the members the engine uses (load, store,
// fetch_add, fetch_sub, compare_exchange_weak) over the compiler's __atomic
// builtins, which the library versions are built on as well. Our own name, rather than a class
// added to namespace std, which the standard does not allow.
#pragma once

#include <atomic>
#include <version>

namespace ssm {

#if defined(__cpp_lib_atomic_ref)
template <class T>
class AtomicRef : public std::atomic_ref<T> {
 public:
  explicit AtomicRef(T& value) noexcept : std::atomic_ref<T>(value) {}
};
#else
template <class T>
class AtomicRef {
 public:
  explicit AtomicRef(T& value) noexcept : p_(&value) {}
  T load(std::memory_order order = std::memory_order_seq_cst) const noexcept {
    return __atomic_load_n(p_, static_cast<int>(order));
  }
  void store(T v, std::memory_order order = std::memory_order_seq_cst) const noexcept {
    __atomic_store_n(p_, v, static_cast<int>(order));
  }
  T fetch_add(T v, std::memory_order order = std::memory_order_seq_cst) const noexcept {
    return __atomic_fetch_add(p_, v, static_cast<int>(order));
  }
  T fetch_sub(T v, std::memory_order order = std::memory_order_seq_cst) const noexcept {
    return __atomic_fetch_sub(p_, v, static_cast<int>(order));
  }
  bool compare_exchange_weak(T& expected, T desired,
                             std::memory_order order = std::memory_order_seq_cst) const noexcept {
    const int failure = order == std::memory_order_acq_rel   ? __ATOMIC_ACQUIRE
                        : order == std::memory_order_release ? __ATOMIC_RELAXED
                                                             : static_cast<int>(order);
    return __atomic_compare_exchange_n(p_, &expected, desired, true, static_cast<int>(order),
                                       failure);
  }

 private:
  T* p_;
};
#endif

template <class T>
AtomicRef(T&) -> AtomicRef<T>;

}  // namespace ssm
