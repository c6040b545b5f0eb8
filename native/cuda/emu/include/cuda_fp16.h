// Emulation build (native/cuda/emu): the half type of cuda_fp16.h that our kernels use, as bits, with
// IEEE round-to-nearest-even conversions through the compiler's _Float16.
#pragma once
#include <cstdint>
#include <cstring>

struct __half {
  uint16_t __x;
};

inline float __half2float(__half h) {
  _Float16 v;
  std::memcpy(&v, &h.__x, 2);
  return static_cast<float>(v);
}
inline __half __float2half_rn(float f) {
  const _Float16 v = static_cast<_Float16>(f);
  __half h;
  std::memcpy(&h.__x, &v, 2);
  return h;
}
inline __half __float2half(float f) { return __float2half_rn(f); }
inline __half __ushort_as_half(unsigned short b) { return __half{b}; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
