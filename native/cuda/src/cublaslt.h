// Our own minimal cuBLASLt declarations: the library is loaded at run time with dlopen (cublaslt.cc), so the
// addon builds with nvcc alone (no cublasLt.h on the build machine) and loads where cuBLAS is absent.
//
// Values checked against the text of NVIDIA's include/cublasLt.h (CUDA 11.x copy, whose ABI values are unchanged
// in 12/13) and cublas_api.h / library_types.h:
//   cublasLtMatmulDescAttributes_t: COMPUTE_TYPE 0, SCALE_TYPE 1, POINTER_MODE 2, TRANSA 3, TRANSB 4, EPILOGUE 7,
//     BIAS_POINTER 8 (bias vector "same type as the output elements", length = rows of D; so BIAS_DATA_TYPE,
//     a later addition, is left at its default: f32 like our D);
//   cublasLtMatrixLayoutAttribute_t: TYPE 0, ORDER 1, ROWS 2, COLS 3, LD 4, BATCH_COUNT 5 (int32),
//     STRIDED_BATCH_OFFSET 6 (int64, elements);
//   cublasLtMatmulPreferenceAttributes_t: SEARCH_MODE 0, MAX_WORKSPACE_BYTES 1 (uint64),
//     MIN_ALIGNMENT_{A,B,C,D}_BYTES 5..8 (uint32, default 256);
//   cublasLtEpilogue_t: DEFAULT 1, BIAS 4; cublasOperation_t: N 0, T 1;
//   cublasComputeType_t: CUBLAS_COMPUTE_32F 68, CUBLAS_COMPUTE_32F_FAST_TF32 77;
//   cudaDataType (library_types.h, present here): CUDA_R_32F 0, CUDA_R_16F 2, CUDA_R_16BF 14;
//   cublasLtMatmulAlgo_t = { uint64_t data[8] }; cublasLtMatmulHeuristicResult_t = { algo, size_t workspaceSize,
//     cublasStatus_t state, float wavesCount, int reserved[4] };
//   cublasStatus_t: SUCCESS 0, NOT_INITIALIZED 1, ALLOC_FAILED 3, INVALID_VALUE 7, ARCH_MISMATCH 8,
//     MAPPING_ERROR 11, EXECUTION_FAILED 13, INTERNAL_ERROR 14, NOT_SUPPORTED 15, LICENSE_ERROR 16.
// Function signatures follow the same header (cublasLtCreate ... cublasLtMatmul).
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>
#include <cstddef>
#include <cstdint>

namespace rmas::lt {

using Status = int;  // cublasStatus_t
constexpr Status kSuccess = 0;
using Handle = struct cublasLtContext*;
using MatmulDesc = struct cublasLtMatmulDescOpaque*;
using MatrixLayout = struct cublasLtMatrixLayoutOpaque*;
using Preference = struct cublasLtMatmulPreferenceOpaque*;

struct MatmulAlgo {
  uint64_t data[8];
};
struct HeuristicResult {
  MatmulAlgo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};

enum ComputeType : int { kCompute32F = 68, kCompute32FFastTF32 = 77 };
enum Operation : int32_t { kOpN = 0, kOpT = 1 };
enum DescAttr : int { kDescComputeType = 0, kDescScaleType = 1, kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8 };
enum LayoutAttr : int { kLayoutBatchCount = 5, kLayoutStridedBatchOffset = 6 };
enum PrefAttr : int { kPrefMaxWorkspaceBytes = 1 };
enum Epilogue : uint32_t { kEpilogueDefault = 1, kEpilogueBias = 4 };

/** The entry points we call, resolved with dlsym. */
struct Api {
  Status (*create)(Handle*);
  Status (*destroy)(Handle);
  size_t (*getVersion)();
  Status (*matmulDescCreate)(MatmulDesc*, int computeType, cudaDataType_t scaleType);
  Status (*matmulDescDestroy)(MatmulDesc);
  Status (*matmulDescSetAttribute)(MatmulDesc, int attr, const void* buf, size_t size);
  Status (*matrixLayoutCreate)(MatrixLayout*, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld);
  Status (*matrixLayoutDestroy)(MatrixLayout);
  Status (*matrixLayoutSetAttribute)(MatrixLayout, int attr, const void* buf, size_t size);
  Status (*preferenceCreate)(Preference*);
  Status (*preferenceDestroy)(Preference);
  Status (*preferenceSetAttribute)(Preference, int attr, const void* buf, size_t size);
  Status (*algoGetHeuristic)(Handle, MatmulDesc, MatrixLayout a, MatrixLayout b, MatrixLayout c, MatrixLayout d, Preference,
                             int requested, HeuristicResult* results, int* returned);
  Status (*matmul)(Handle, MatmulDesc, const void* alpha, const void* A, MatrixLayout, const void* B, MatrixLayout,
                   const void* beta, const void* C, MatrixLayout, void* D, MatrixLayout, const MatmulAlgo* algo,
                   void* workspace, size_t workspaceBytes, cudaStream_t stream);
};

/** Loads cuBLASLt once (libcublasLt.so.13, .so.12, .so.11); nullptr when none loads (see load_error()). */
const Api* api();
/** The path of the loaded library, or nullptr. */
const char* loaded_path();
/** Why no library loaded ("" when one did). */
const char* load_error();
/** A readable name for a cublasStatus_t ("CUBLAS_STATUS_NOT_SUPPORTED"). */
const char* status_name(Status s);

/** Detail for the last failed launch (set by kernels that call cuBLASLt; the addon appends it to its error). */
void set_detail(const char* fmt, ...);
const char* detail();
void clear_detail();

}  // namespace rmas::lt
