// Our own declarations of the few NCCL entry points the addon calls. Like cuBLASLt (cublaslt.h), NCCL is opened
// at run time with dlopen (nccl.cc), so nvcc alone builds the addon (no nccl.h on the build machine) and the addon
// loads where NCCL is absent; only a collective asked for then fails, saying why.
//
// Values checked against NVIDIA's public nccl.h and the NCCL developer guide (API: communicators, collectives):
//   ncclResult_t: Success 0, UnhandledCudaError 1, SystemError 2, InternalError 3, InvalidArgument 4,
//     InvalidUsage 5, RemoteError 6, InProgress 7;
//   ncclDataType_t: Float32 (= ncclFloat) 7;  ncclRedOp_t: Sum 0 (both enums are int-sized);
//   ncclUniqueId = { char internal[NCCL_UNIQUE_ID_BYTES = 128] }, passed by value to ncclCommInitRank;
//   ncclGetVersion's code is MAJOR*10000 + MINOR*100 + PATCH since 2.9 (MAJOR*1000 + MINOR*100 + PATCH before).
// Signatures: ncclGetVersion(int*), ncclGetUniqueId(ncclUniqueId*), ncclCommInitRank(ncclComm_t*, int nranks,
// ncclUniqueId, int rank), ncclCommDestroy(ncclComm_t), ncclAllReduce(const void* send, void* recv, size_t count,
// ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t), ncclBroadcast(const void* send, void* recv, size_t count,
// ncclDataType_t, int root, ncclComm_t, cudaStream_t), ncclGetErrorString(ncclResult_t) and, since 2.13,
// ncclGetLastError(ncclComm_t) (optional here: older libraries lack it).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace rmas::nccl {

using Result = int;  // ncclResult_t
constexpr Result kSuccess = 0;
constexpr Result kSystemError = 2;
constexpr Result kInvalidArgument = 4;
constexpr Result kRemoteError = 6;
using Comm = struct ncclComm*;

constexpr size_t kUniqueIdBytes = 128;
struct UniqueId {
  char internal[kUniqueIdBytes];
};

constexpr int kFloat32 = 7;  // ncclDataType_t
constexpr int kSum = 0;      // ncclRedOp_t

/** The entry points we call, resolved with dlsym. */
struct Api {
  Result (*getVersion)(int*);
  Result (*getUniqueId)(UniqueId*);
  Result (*commInitRank)(Comm*, int nranks, UniqueId id, int rank);
  Result (*commDestroy)(Comm);
  Result (*allReduce)(const void* send, void* recv, size_t count, int dtype, int op, Comm, cudaStream_t);
  Result (*broadcast)(const void* send, void* recv, size_t count, int dtype, int root, Comm, cudaStream_t);
  const char* (*getErrorString)(Result);
  /** Optional (NCCL 2.13+): what went wrong, in more words than the result code; null when the library lacks it. */
  const char* (*getLastError)(Comm);
};

/**
 * Loads NCCL once, on first use (never when the addon loads): RMAS_NCCL (a path) alone when set, else
 * libnccl.so.2; the emulator build loads libnccl_emu.so from beside the addon. nullptr when none loads (load_error()).
 */
const Api* api();
/** The path of the loaded library, or nullptr. */
const char* loaded_path();
/** Why no library loaded ("" when one did). */
const char* load_error();
/** The library's ncclGetVersion code, or -1 when none loaded or it failed. */
int version();
/** "ncclRemoteError (6): <the library's text>[; <its last error>]" for a failed call. */
std::string describe(Result r, Comm comm);

}  // namespace rmas::nccl
