// Emulation build (native/cuda/emu): the bfloat16 type of cuda_bf16.h that our kernels use, as bits.
#pragma once
#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t __x;
};

inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t b = static_cast<uint32_t>(h.__x) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/** Round to nearest even; NaN stays a (quiet) NaN. */
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{static_cast<uint16_t>((b >> 16) | 0x40u)};
  b += 0x7fffu + ((b >> 16) & 1u);
  return __nv_bfloat16{static_cast<uint16_t>(b >> 16)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __nv_bfloat16{b}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
