// std::atomic_ref for the standard libraries that lack it: libc++ 14, the
// one of Debian's emscripten 3.1.6 (the WebAssembly build, docs/WEB.md),
// has no atomic_ref (libc++ 19 added it). The fallback has the members the
// engine uses (load, store, fetch_add, fetch_sub) over the compiler's
// __atomic builtins, which the std::atomic_ref of GCC and newer libc++ are
// built on as well. It is declared in namespace std, so that the code
// using it reads the same in every build; a newer library's own
// atomic_ref (__cpp_lib_atomic_ref) is used wherever it exists.
#pragma once

#include <atomic>
#include <version>

#if !defined(__cpp_lib_atomic_ref) && defined(_LIBCPP_VERSION)
namespace std {  // NOLINT(cert-dcl58-cpp): a stand-in for the missing standard type

template <class T>
class atomic_ref {
 public:
  explicit atomic_ref(T& value) noexcept : p_(&value) {}
  T load(memory_order order = memory_order_seq_cst) const noexcept {
    return __atomic_load_n(p_, static_cast<int>(order));
  }
  void store(T v, memory_order order = memory_order_seq_cst) const noexcept {
    __atomic_store_n(p_, v, static_cast<int>(order));
  }
  T fetch_add(T v, memory_order order = memory_order_seq_cst) const noexcept {
    return __atomic_fetch_add(p_, v, static_cast<int>(order));
  }
  T fetch_sub(T v, memory_order order = memory_order_seq_cst) const noexcept {
    return __atomic_fetch_sub(p_, v, static_cast<int>(order));
  }

 private:
  T* p_;
};

}  // namespace std
#endif
