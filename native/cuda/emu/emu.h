// The CUDA emulator's execution model: what a kernel file needs from nvcc, for g++ on a CPU.
//
// The emulation build (scripts/build-cuda-emu.mjs) compiles the addon's own sources unchanged except for two
// textual rewrites: `kernel<<<grid, block, smem, stream>>>(args)` becomes
// `::rmas_emu::launch(kernel, "kernel", grid, block, smem, stream)(args)` (or, when the kernel is named
// without template arguments, which may then be deduced from the call, `launch_deduced` with a lambda that
// makes the call), and `extern __shared__ T name[];`
// becomes a pointer to the launch's dynamic shared memory. This header is force-included first.
//
// Every thread of a block is a fiber with its own stack; the blocks of a grid run one after another on the
// calling thread. A fiber runs until it reaches __syncthreads() or a warp shuffle, where it waits for the
// rest of its block or warp, as the hardware does. So __shared__ is a static (one block lives at a time),
// atomics are plain read-modify-writes, and barrier misuse that hangs or corrupts on a GPU is reported:
// a barrier some threads never reach, a shuffle naming lanes that exited or do not exist.
// What it does not model: concurrency between threads outside barriers (a missing __syncthreads shows up
// only when the fiber order exposes it; RMAS_CUDA_EMU_ORDER=reverse runs the threads of each step in
// reverse), memory spaces (any pointer works in any kernel), timing.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
// __shared__ arrays become statics through the build's rewrite (poisoned per block); anything left is a static too
#define __shared__ static
#define __align__(n) alignas(n)

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// vector types, with the hardware's alignment (a misaligned vector load faults on a GPU; here it does not)
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// The running fiber's coordinates; the scheduler sets them before it resumes a fiber.
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
constexpr int warpSize = 32;

namespace rmas_emu {

/** Waits for every thread of the block (__syncthreads at file:line: threads at different barriers diverge). */
void sync_block(const char* file, int line);
/** Fills a static shared array with 0xff the first time a thread of the running block reaches its declaration. */
void poison_shared(void* p, size_t bytes);
/** Exchanges 8 bytes within the warp: mode 0 = from lane `lane`, 1 = xor, 2 = down, 3 = up; width as in CUDA. */
uint64_t shuffle(unsigned mask, uint64_t bits, int lane, int mode, int width);
/** The current launch's dynamic shared memory (`extern __shared__`). */
void* dynamic_smem();

struct LaunchConfig {
  dim3 grid, block;
  size_t smem;
  const void* stream;
  const void* fn;
  const char* name;
};
/** Runs entry(ctx) as every thread of the grid; records the outcome as the runtime's last error. */
void run_grid(const LaunchConfig& cfg, void (*entry)(void*), void* ctx);

template <typename... P>
struct Launch {
  void (*fn)(P...);
  LaunchConfig cfg;
  template <typename... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
    // converted as the call would convert them, once per launch (kernel parameters are by value)
    std::tuple<P...> bound(std::forward<A>(args)...);
    struct Ctx {
      void (*fn)(P...);
      std::tuple<P...>* args;
    } c{fn, &bound};
    run_grid(cfg, [](void* p) { auto* k = static_cast<Ctx*>(p); std::apply(k->fn, *k->args); }, &c);
  }
};

template <typename... P>
Launch<P...> launch(void (*fn)(P...), const char* name, dim3 grid, dim3 block, size_t smem = 0, const void* stream = nullptr) {
  return Launch<P...>{fn, LaunchConfig{grid, block, smem, stream, reinterpret_cast<const void*>(fn), name}};
}

/** A launch whose kernel is a template deduced from the arguments: `body` makes the call per thread. */
template <typename L>
struct DeducedLaunch {
  L body;
  LaunchConfig cfg;
  template <typename... A>
  void operator()(A&&... args) const {
    std::tuple<std::decay_t<A>...> bound(std::forward<A>(args)...);
    struct Ctx {
      const L* body;
      std::tuple<std::decay_t<A>...>* args;
    } c{&body, &bound};
    run_grid(cfg, [](void* p) { auto* k = static_cast<Ctx*>(p); std::apply(*k->body, *k->args); }, &c);
  }
};

/** No function address here, so such a kernel cannot have opted in to over 48 KiB of dynamic shared memory. */
template <typename L>
DeducedLaunch<L> launch_deduced(L body, const char* name, dim3 grid, dim3 block, size_t smem = 0, const void* stream = nullptr) {
  return DeducedLaunch<L>{body, LaunchConfig{grid, block, smem, stream, nullptr, name}};
}

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace rmas_emu

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { rmas_emu::sync_block(file, line); }

template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return rmas_emu::from_bits<T>(rmas_emu::shuffle(mask, rmas_emu::to_bits(v), src, 0, width));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
  return rmas_emu::from_bits<T>(rmas_emu::shuffle(mask, rmas_emu::to_bits(v), laneMask, 1, width));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return rmas_emu::from_bits<T>(rmas_emu::shuffle(mask, rmas_emu::to_bits(v), int(delta), 2, width));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return rmas_emu::from_bits<T>(rmas_emu::shuffle(mask, rmas_emu::to_bits(v), int(delta), 3, width));
}

// Fibers switch only at barriers, so a read-modify-write is atomic.
template <typename T, typename U>
T atomicAdd(T* p, U v) {
  const T old = *p;
  *p = static_cast<T>(old + v);
  return old;
}
template <typename T, typename U>
T atomicSub(T* p, U v) {
  const T old = *p;
  *p = static_cast<T>(old - v);
  return old;
}
template <typename T, typename U>
T atomicMax(T* p, U v) {
  const T old = *p;
  *p = old < static_cast<T>(v) ? static_cast<T>(v) : old;
  return old;
}
template <typename T, typename U>
T atomicMin(T* p, U v) {
  const T old = *p;
  *p = static_cast<T>(v) < old ? static_cast<T>(v) : old;
  return old;
}
template <typename T, typename U>
T atomicExch(T* p, U v) {
  const T old = *p;
  *p = static_cast<T>(v);
  return old;
}
template <typename T, typename U, typename V>
T atomicCAS(T* p, U expected, V desired) {
  const T old = *p;
  if (old == static_cast<T>(expected)) *p = static_cast<T>(desired);
  return old;
}

// CUDA's device min/max accept mixed integer types
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

inline float __uint_as_float(uint32_t b) { return rmas_emu::from_bits<float>(b); }
inline uint32_t __float_as_uint(float f) { return static_cast<uint32_t>(rmas_emu::to_bits(f)); }
inline float __int_as_float(int32_t b) { return rmas_emu::from_bits<float>(static_cast<uint32_t>(b)); }
inline int32_t __float_as_int(float f) { return static_cast<int32_t>(rmas_emu::to_bits(f)); }

// Explicitly rounded IEEE operations; the build passes -ffp-contract=off, so nothing here fuses.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : x > 1.f ? 1.f : x; }
template <typename T>
inline T __ldg(const T* p) { return *p; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
