// Storage conversions shared by cast.cu and embedding.cu, written on bits so that they match
// src/formats/dtype.ts exactly: f32 -> f16/bf16 round to nearest even (f16 overflow -> inf, NaN kept
// quiet), f16/bf16 -> f32 exact, and the quantized row layout of dtype.ts (NOT GGML's interleaved
// blocks): a row of `cols` values stores all its quant bytes first (q8_0: cols int8; q4_0: cols / 2
// bytes, block b at byte 16 b, value j in the low nibble and j + 16 in the high one, both offset by 8),
// then cols / 32 f16 scales, then zero padding to 4 bytes. Header only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../registry.h"

namespace rmas {
namespace bits {

constexpr int64_t kQK = 32;

/** f32 bits -> f16 bits, as f32ToF16Bits in formats/dtype.ts. */
__device__ __forceinline__ uint32_t f32_to_f16(uint32_t x) {
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ex = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (ex == 0xffu) return sign | 0x7c00u | (mant ? 0x200u : 0u);
  const int e = static_cast<int>(ex) - 112;
  if (e >= 31) return sign | 0x7c00u;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return sign | half;
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;  // a carry into the exponent is correct
  return sign | half;
}

/** f16 bits -> f32 bits, exact (subnormals normalised, NaN payload kept). */
__device__ __forceinline__ uint32_t f16_to_f32(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t ex = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (ex == 0x1fu) return sign | 0x7f800000u | (mant << 13);
  if (ex != 0u) return sign | ((ex + 112u) << 23) | (mant << 13);
  if (mant == 0u) return sign;
  uint32_t e = 113u;
  do {
    mant <<= 1;
    e--;
  } while (!(mant & 0x400u));
  return sign | (e << 23) | ((mant & 0x3ffu) << 13);
}

/** f32 bits -> bf16 bits, as f32ToBf16Bits in formats/dtype.ts. */
__device__ __forceinline__ uint32_t f32_to_bf16(uint32_t x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return ((x >> 16) | 0x40u) & 0xffffu;
  return ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16) & 0xffffu;
}

__device__ __forceinline__ float f16_value(uint16_t h) { return __uint_as_float(f16_to_f32(h)); }
__device__ __forceinline__ float bf16_value(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

/** Bytes of one quantized row of `cols` values (scales and padding included), as rowBytes in dtype.ts. */
__host__ __device__ __forceinline__ int64_t quant_row_bytes(int64_t dtype, int64_t cols) {
  const int64_t q = dtype == Q8_0 ? cols : cols / 2;
  return q + (((cols / kQK) * 2 + 3) & ~int64_t{3});
}

/**
 * Value `c` of the quantized row starting at `row` (cols values). The product int x f16 scale is exact
 * in f32 (at most 8 x 11 significant bits), so this equals the CPU decode bit for bit.
 */
template <int64_t DT>
__device__ __forceinline__ float quant_value(const uint8_t* __restrict__ row, int64_t cols, int64_t c) {
  const int64_t blk = c / kQK, j = c % kQK;
  const int64_t qbytes = DT == Q8_0 ? cols : cols / 2;
  const uint8_t* s = row + qbytes + 2 * blk;
  const float scale = f16_value(static_cast<uint16_t>(s[0] | (s[1] << 8)));
  if (DT == Q8_0) return static_cast<float>(static_cast<int8_t>(row[c])) * scale;
  const uint8_t b = row[blk * (kQK / 2) + (j & 15)];
  const int q = j < 16 ? (b & 15) : (b >> 4);
  return static_cast<float>(q - 8) * scale;
}

/** Value i (row-major) of a tensor with last dim `cols` stored as `dtype` (f32, f16, bf16, q8_0, q4_0). */
template <int64_t DT>
__device__ __forceinline__ float load_value(const void* __restrict__ p, int64_t cols, int64_t i) {
  if (DT == F32) return static_cast<const float*>(p)[i];
  if (DT == F16) return f16_value(static_cast<const uint16_t*>(p)[i]);
  if (DT == BF16) return bf16_value(static_cast<const uint16_t*>(p)[i]);
  const int64_t r = i / cols, c = i % cols;
  return quant_value<DT>(static_cast<const uint8_t*>(p) + r * quant_row_bytes(DT, cols), cols, c);
}

}  // namespace bits
}  // namespace rmas
