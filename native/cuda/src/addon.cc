// The N-API surface of the CUDA backend (src/gpu/cuda-addon.ts types it). A process may open several
// devices (init(device) each), one stream per device; every call works on the current device, which init
// and use(device) select, so that one backend per device (src/tensor/cuda.ts) selects its own before it
// calls. copyPeer moves bytes between two open devices with both streams ordered around the copy.
// Allocations come from each device's stream-ordered pool (cudaMallocAsync), which keeps freed memory for
// reuse. Failures throw JS Errors carrying the CUDA error code and name.
// NCCL (nccl.{h,cc}) is opened on the first nccl* call, never at load: its collectives run on the current
// device's stream, so they are ordered with the kernels around them, and fail with NCCL's own words.
#include <napi.h>

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cublaslt.h"
#include "nccl.h"
#include "registry.h"

namespace {

struct Device {
  int device = -1;
  cudaStream_t stream = nullptr;
  int ccMajor = 0, ccMinor = 0;
  std::string name;
};

/** The open devices, and the current one (g: its state; g.device < 0 before any init). */
std::map<int, Device> g_open;
Device g;

Napi::Error cudaError(Napi::Env env, cudaError_t e, const std::string& what, const std::string& detail = "") {
  std::string msg = what + " failed: " + cudaGetErrorName(e) + " (" + std::to_string(int(e)) + "): " + cudaGetErrorString(e);
  if (!detail.empty()) msg += "; " + detail;
  Napi::Error err = Napi::Error::New(env, msg);
  err.Set("code", Napi::Number::New(env, int(e)));
  err.Set("cudaError", Napi::String::New(env, cudaGetErrorName(e)));
  return err;
}

void check(Napi::Env env, cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  Napi::Error err = cudaError(env, e, what);
  // the runtime also keeps a failed call's error as the last error: clear it, or the next kernel launch, which
  // reads cudaGetLastError(), would report it (a sticky error stays regardless)
  cudaGetLastError();
  throw err;
}

void needInit(Napi::Env env, const char* what) {
  if (g.device < 0) throw Napi::Error::New(env, std::string(what) + ": call init(device) first");
}

Device& openDevice(Napi::Env env, int device, const char* what) {
  auto it = g_open.find(device);
  if (it == g_open.end())
    throw Napi::Error::New(env, std::string(what) + ": device " + std::to_string(device) + " is not open; call init(" +
                                    std::to_string(device) + ") first");
  return it->second;
}

/** Makes `device` (open) the current one: the CUDA runtime's and this addon's. */
void select(Napi::Env env, int device, const char* what) {
  Device& d = openDevice(env, device, what);
  if (g.device != device) {
    check(env, cudaSetDevice(device), "cudaSetDevice");
    g = d;
  }
}

uint64_t toPtr(const Napi::Value& v, const char* what) {
  bool lossless = true;
  if (v.IsBigInt()) return v.As<Napi::BigInt>().Uint64Value(&lossless);
  if (v.IsNumber()) return uint64_t(v.As<Napi::Number>().Int64Value());
  throw Napi::TypeError::New(v.Env(), std::string(what) + ": expected a bigint device address");
}

size_t toSize(const Napi::Value& v, const char* what) {
  if (v.IsBigInt()) {
    bool lossless = true;
    return size_t(v.As<Napi::BigInt>().Uint64Value(&lossless));
  }
  if (!v.IsNumber() || v.As<Napi::Number>().DoubleValue() < 0)
    throw Napi::TypeError::New(v.Env(), std::string(what) + ": expected a byte count");
  return size_t(v.As<Napi::Number>().Int64Value());
}

Napi::Value Probe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object r = Napi::Object::New(env);
  int count = 0, driver = 0, runtime = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  r.Set("code", Napi::Number::New(env, int(e)));
  r.Set("error", e == cudaSuccess ? env.Null() : Napi::String::New(env, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)));
  Napi::Array devices = Napi::Array::New(env);
  for (int i = 0; e == cudaSuccess && i < count; i++) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    Napi::Object d = Napi::Object::New(env);
    d.Set("index", i);
    d.Set("name", p.name);
    d.Set("major", p.major);
    d.Set("minor", p.minor);
    d.Set("totalMem", double(p.totalGlobalMem));
    d.Set("multiProcessors", p.multiProcessorCount);
    devices.Set(devices.Length(), d);
  }
  r.Set("devices", devices);
  r.Set("driverVersion", driver);
  r.Set("runtimeVersion", runtime);
  const char* path = rmas::lt::loaded_path();
  r.Set("cublasLt", path ? Napi::String::New(env, path) : env.Null());
  r.Set("cublasLtError", path ? env.Null() : Napi::String::New(env, rmas::lt::load_error()));
  cudaGetLastError();  // probing leaves nothing sticky behind
  return r;
}

Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int device = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : 0;
  if (!g_open.count(device)) {
    check(env, cudaSetDevice(device), "cudaSetDevice");
    Device d;
    cudaDeviceProp p{};
    check(env, cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    check(env, cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // keep freed blocks in the pool instead of returning them to the driver at every sync
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    d.device = device, d.ccMajor = p.major, d.ccMinor = p.minor, d.name = p.name;
    g_open[device] = d;
    // the runtime's current device changed above: the addon's follows it
    g = d;
  }
  select(env, device, "init");
  Napi::Object r = Napi::Object::New(env);
  r.Set("device", g.device);
  r.Set("name", g.name);
  r.Set("major", g.ccMajor);
  r.Set("minor", g.ccMinor);
  return r;
}

Napi::Value Use(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "use: expected a device index");
  select(env, info[0].As<Napi::Number>().Int32Value(), "use");
  return Napi::Number::New(env, g.device);
}

Napi::Value Current(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), g.device);
}

// copyPeer(dst, dstDevice, src, srcDevice, bytes): the destination's stream waits for the work queued on
// the source's, copies, and the source's stream waits for the copy, so that a free of src queued after
// this call cannot hand its memory to a new allocation while the copy still reads it.
Napi::Value CopyPeer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint64_t dst = toPtr(info[0], "copyPeer");
  const int dstDevice = info[1].As<Napi::Number>().Int32Value();
  const uint64_t src = toPtr(info[2], "copyPeer");
  const int srcDevice = info[3].As<Napi::Number>().Int32Value();
  const size_t bytes = toSize(info[4], "copyPeer");
  Device& s = openDevice(env, srcDevice, "copyPeer");
  Device& d = openDevice(env, dstDevice, "copyPeer");
  // the runtime's current device goes back to the addon's on every way out, a thrown error included
  struct Restore {
    int device;
    ~Restore() { if (device >= 0) cudaSetDevice(device); }
  } restore{g.device};
  if (bytes) {
    cudaEvent_t ready = nullptr, done = nullptr;
    check(env, cudaSetDevice(srcDevice), "cudaSetDevice");
    check(env, cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check(env, cudaEventRecord(ready, s.stream), "cudaEventRecord");
    check(env, cudaSetDevice(dstDevice), "cudaSetDevice");
    check(env, cudaStreamWaitEvent(d.stream, ready, 0), "cudaStreamWaitEvent");
    check(env,
          cudaMemcpyPeerAsync(reinterpret_cast<void*>(uintptr_t(dst)), dstDevice, reinterpret_cast<const void*>(uintptr_t(src)), srcDevice,
                              bytes, d.stream),
          "cudaMemcpyPeerAsync");
    check(env, cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check(env, cudaEventRecord(done, d.stream), "cudaEventRecord");
    check(env, cudaSetDevice(srcDevice), "cudaSetDevice");
    check(env, cudaStreamWaitEvent(s.stream, done, 0), "cudaStreamWaitEvent");
    // destroying a recorded event is allowed: its resources go once it has completed
    cudaEventDestroy(ready);
    cudaSetDevice(dstDevice);
    cudaEventDestroy(done);
  }
  return env.Undefined();
}

Napi::Value Malloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "malloc");
  const size_t bytes = toSize(info[0], "malloc");
  void* p = nullptr;
  cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, g.stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw cudaError(env, e, "cudaMallocAsync(" + std::to_string(bytes) + " bytes)");
  }
  return Napi::BigInt::New(env, uint64_t(reinterpret_cast<uintptr_t>(p)));
}

Napi::Value Free(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "free");
  const uint64_t p = toPtr(info[0], "free");
  if (p) check(env, cudaFreeAsync(reinterpret_cast<void*>(uintptr_t(p)), g.stream), "cudaFreeAsync");
  return env.Undefined();
}

Napi::Value Upload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "upload");
  const uint64_t p = toPtr(info[0], "upload");
  if (!info[1].IsTypedArray()) throw Napi::TypeError::New(env, "upload: expected a Uint8Array");
  Napi::TypedArray t = info[1].As<Napi::TypedArray>();
  const uint8_t* src = static_cast<const uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset();
  // from pageable memory this returns once the bytes are staged, so the JS buffer may be reused at once
  if (t.ByteLength())
    check(env, cudaMemcpyAsync(reinterpret_cast<void*>(uintptr_t(p)), src, t.ByteLength(), cudaMemcpyHostToDevice, g.stream),
          "cudaMemcpy (upload)");
  return env.Undefined();
}

Napi::Value Download(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "download");
  const uint64_t p = toPtr(info[0], "download");
  const size_t bytes = toSize(info[1], "download");
  Napi::Uint8Array out = Napi::Uint8Array::New(env, bytes);
  if (bytes) {
    check(env, cudaMemcpyAsync(out.Data(), reinterpret_cast<const void*>(uintptr_t(p)), bytes, cudaMemcpyDeviceToHost, g.stream),
          "cudaMemcpy (download)");
    check(env, cudaStreamSynchronize(g.stream), "cudaStreamSynchronize (download)");
  }
  return out;
}

Napi::Value Memset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "memset");
  const uint64_t p = toPtr(info[0], "memset");
  const size_t bytes = toSize(info[1], "memset");
  const int value = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().Int32Value() : 0;
  if (bytes) check(env, cudaMemsetAsync(reinterpret_cast<void*>(uintptr_t(p)), value, bytes, g.stream), "cudaMemsetAsync");
  return env.Undefined();
}

Napi::Value Copy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "copy");
  const uint64_t dst = toPtr(info[0], "copy"), src = toPtr(info[1], "copy");
  const size_t bytes = toSize(info[2], "copy");
  if (bytes)
    check(env,
          cudaMemcpyAsync(reinterpret_cast<void*>(uintptr_t(dst)), reinterpret_cast<const void*>(uintptr_t(src)), bytes,
                          cudaMemcpyDeviceToDevice, g.stream),
          "cudaMemcpy (copy)");
  return env.Undefined();
}

Napi::Value Sync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "sync");
  check(env, cudaStreamSynchronize(g.stream), "cudaStreamSynchronize");
  return env.Undefined();
}

Napi::Value MemInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "memInfo");
  size_t free = 0, total = 0;
  check(env, cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  Napi::Object r = Napi::Object::New(env);
  r.Set("free", double(free));
  r.Set("total", double(total));
  cudaMemPool_t pool;
  uint64_t used = 0, reserved = 0, usedHigh = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, g.device) == cudaSuccess) {
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &usedHigh);
  }
  r.Set("poolUsed", double(used));
  r.Set("poolReserved", double(reserved));
  r.Set("poolUsedHigh", double(usedHigh));
  cudaGetLastError();
  return r;
}

// resetPeak(): the pool's high-water marks restart from what is in use now (memInfo().poolUsedHigh).
Napi::Value ResetPeak(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "resetPeak");
  cudaMemPool_t pool;
  check(env, cudaDeviceGetDefaultMemPool(&pool, g.device), "cudaDeviceGetDefaultMemPool");
  uint64_t zero = 0;
  check(env, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), "cudaMemPoolSetAttribute (UsedMemHigh)");
  check(env, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero), "cudaMemPoolSetAttribute (ReservedMemHigh)");
  return env.Undefined();
}

template <typename T>
std::vector<T> numbers(const Napi::Value& v, const char* what, bool big) {
  std::vector<T> out;
  if (v.IsUndefined() || v.IsNull()) return out;
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), std::string("launch: ") + what + " must be an array");
  Napi::Array a = v.As<Napi::Array>();
  out.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value x = a.Get(i);
    if (big) out.push_back(T(toPtr(x, "launch ptrs")));
    else if (x.IsNumber()) out.push_back(T(x.As<Napi::Number>().DoubleValue()));
    else throw Napi::TypeError::New(v.Env(), std::string("launch: ") + what + "[" + std::to_string(i) + "] is not a number");
  }
  return out;
}

Napi::Value Launch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throw Napi::TypeError::New(env, "launch: expected a kernel name");
  const std::string name = info[0].As<Napi::String>();
  rmas::KernelFn fn = rmas::find_kernel(name.c_str());
  if (!fn)
    throw Napi::Error::New(env,
                           "launch: no CUDA kernel named \"" + name + "\" is registered in this addon (rebuild it: npm run build:cuda)");
  needInit(env, "launch");
  const auto ptrs = numbers<uint64_t>(info[1], "ptrs", true);
  const auto ints = numbers<int64_t>(info[2], "ints", false);
  const auto floats = numbers<double>(info[3], "floats", false);
  rmas::LaunchArgs a{g.stream, ptrs.data(), int(ptrs.size()), ints.data(), int(ints.size()),
                     floats.data(), int(floats.size()), g.ccMajor, g.ccMinor};
  rmas::lt::clear_detail();
  cudaError_t e = fn(a);
  if (e != cudaSuccess) {
    std::string detail = rmas::lt::detail();
    if (e == cudaErrorInvalidValue && detail.empty())
      detail = "check the argument counts (" + std::to_string(ptrs.size()) + " ptrs, " + std::to_string(ints.size()) + " ints, " +
               std::to_string(floats.size()) + " floats), the shapes and the launch configuration";
    Napi::Error err = cudaError(env, e, "kernel " + name, detail);
    cudaGetLastError();  // a failure left pending (cudaFuncSetAttribute, a launch) must not be blamed on the next call
    throw err;
  }
  return env.Undefined();
}

Napi::Value Kernels(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env);
  rmas::list_kernels([](const char* n, void* user) {
    auto* arr = static_cast<Napi::Array*>(user);
    arr->Set(arr->Length(), Napi::String::New(arr->Env(), n));
  }, &out);
  return out;
}

Napi::Value DeviceName(const Napi::CallbackInfo& info) {
  needInit(info.Env(), "deviceName");
  return Napi::String::New(info.Env(), g.name);
}

Napi::Value Capability(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "capability");
  Napi::Object r = Napi::Object::New(env);
  r.Set("major", g.ccMajor);
  r.Set("minor", g.ccMinor);
  return r;
}

// NCCL communicators by handle, each with the device that was current when it was made (its stream is the one
// its collectives go on).
struct NcclComm {
  rmas::nccl::Comm comm;
  int device;
};
std::map<int, NcclComm> g_comms;
int g_nextComm = 1;

const rmas::nccl::Api& ncclApi(Napi::Env env, const char* what) {
  const rmas::nccl::Api* a = rmas::nccl::api();
  if (!a) throw Napi::Error::New(env, std::string(what) + ": " + rmas::nccl::load_error());
  return *a;
}

void ncclCheck(Napi::Env env, rmas::nccl::Result r, const std::string& what, rmas::nccl::Comm comm) {
  if (r == rmas::nccl::kSuccess) return;
  Napi::Error err = Napi::Error::New(env, what + " failed: " + rmas::nccl::describe(r, comm));
  err.Set("ncclResult", Napi::Number::New(env, r));
  throw err;
}

/** The communicator of handle info[0]; it must belong to the current device, whose stream the call uses. */
NcclComm& ncclComm(const Napi::CallbackInfo& info, const char* what) {
  Napi::Env env = info.Env();
  needInit(env, what);
  auto it = info.Length() > 0 && info[0].IsNumber() ? g_comms.find(info[0].As<Napi::Number>().Int32Value()) : g_comms.end();
  if (it == g_comms.end()) throw Napi::Error::New(env, std::string(what) + ": not a communicator of ncclCommInit (or destroyed)");
  if (it->second.device != g.device)
    throw Napi::Error::New(env, std::string(what) + ": the communicator belongs to device " + std::to_string(it->second.device) +
                                    ", the current device is " + std::to_string(g.device) + "; call use(" +
                                    std::to_string(it->second.device) + ") first");
  return it->second;
}

// ncclProbe(): whether NCCL loads (loading it now, once), from where, its version code, or why not. Never throws.
Napi::Value NcclProbe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object r = Napi::Object::New(env);
  const char* path = rmas::nccl::loaded_path();
  r.Set("loaded", Napi::Boolean::New(env, path != nullptr));
  r.Set("path", path ? Napi::String::New(env, path) : env.Null());
  r.Set("version", path && rmas::nccl::version() >= 0 ? Napi::Number::New(env, rmas::nccl::version()) : env.Null());
  r.Set("error", path ? env.Null() : Napi::String::New(env, rmas::nccl::load_error()));
  return r;
}

Napi::Value NcclUniqueId(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const rmas::nccl::Api& a = ncclApi(env, "ncclUniqueId");
  rmas::nccl::UniqueId id{};
  ncclCheck(env, a.getUniqueId(&id), "ncclGetUniqueId", nullptr);
  Napi::Uint8Array out = Napi::Uint8Array::New(env, rmas::nccl::kUniqueIdBytes);
  std::memcpy(out.Data(), id.internal, rmas::nccl::kUniqueIdBytes);
  return out;
}

// ncclCommInit(id, nranks, rank): joins the communicator of `id` on the current device; waits for every rank.
Napi::Value NcclCommInit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  needInit(env, "ncclCommInit");
  const rmas::nccl::Api& a = ncclApi(env, "ncclCommInit");
  if (info.Length() < 3 || !info[0].IsTypedArray() || !info[1].IsNumber() || !info[2].IsNumber())
    throw Napi::TypeError::New(env, "ncclCommInit: expected (id: Uint8Array, nranks: number, rank: number)");
  Napi::TypedArray t = info[0].As<Napi::TypedArray>();
  if (t.ByteLength() != rmas::nccl::kUniqueIdBytes)
    throw Napi::TypeError::New(env, "ncclCommInit: the id must be the 128 bytes of ncclUniqueId(), got " + std::to_string(t.ByteLength()));
  const int nranks = info[1].As<Napi::Number>().Int32Value(), rank = info[2].As<Napi::Number>().Int32Value();
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw Napi::RangeError::New(env, "ncclCommInit: rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " is out of range");
  rmas::nccl::UniqueId id{};
  std::memcpy(id.internal, static_cast<const uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset(), rmas::nccl::kUniqueIdBytes);
  rmas::nccl::Comm comm = nullptr;
  ncclCheck(env, a.commInitRank(&comm, nranks, id, rank),
            "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")", nullptr);
  const int handle = g_nextComm++;
  g_comms[handle] = NcclComm{comm, g.device};
  return Napi::Number::New(env, handle);
}

// ncclAllReduce(comm, ptr, count): f32 sum over the ranks, in place, queued on the current device's stream.
Napi::Value NcclAllReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NcclComm& c = ncclComm(info, "ncclAllReduce");
  void* p = reinterpret_cast<void*>(uintptr_t(toPtr(info[1], "ncclAllReduce")));
  const size_t count = toSize(info[2], "ncclAllReduce");
  ncclCheck(env, ncclApi(env, "ncclAllReduce").allReduce(p, p, count, rmas::nccl::kFloat32, rmas::nccl::kSum, c.comm, g.stream),
            "ncclAllReduce", c.comm);
  return env.Undefined();
}

// ncclBroadcast(comm, ptr, count, root): root's f32 values on every rank, in place, on the current device's stream.
Napi::Value NcclBroadcast(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NcclComm& c = ncclComm(info, "ncclBroadcast");
  void* p = reinterpret_cast<void*>(uintptr_t(toPtr(info[1], "ncclBroadcast")));
  const size_t count = toSize(info[2], "ncclBroadcast");
  if (info.Length() < 4 || !info[3].IsNumber()) throw Napi::TypeError::New(env, "ncclBroadcast: expected a root rank");
  const int root = info[3].As<Napi::Number>().Int32Value();
  ncclCheck(env, ncclApi(env, "ncclBroadcast").broadcast(p, p, count, rmas::nccl::kFloat32, root, c.comm, g.stream), "ncclBroadcast",
            c.comm);
  return env.Undefined();
}

Napi::Value NcclCommDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto it = info.Length() > 0 && info[0].IsNumber() ? g_comms.find(info[0].As<Napi::Number>().Int32Value()) : g_comms.end();
  if (it == g_comms.end()) throw Napi::Error::New(env, "ncclCommDestroy: not a communicator of ncclCommInit (or destroyed)");
  const rmas::nccl::Comm comm = it->second.comm;
  g_comms.erase(it);
  ncclCheck(env, ncclApi(env, "ncclCommDestroy").commDestroy(comm), "ncclCommDestroy", nullptr);
  return env.Undefined();
}

Napi::Object Module(Napi::Env env, Napi::Object exports) {
  exports.Set("probe", Napi::Function::New(env, Probe));
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("use", Napi::Function::New(env, Use));
  exports.Set("current", Napi::Function::New(env, Current));
  exports.Set("copyPeer", Napi::Function::New(env, CopyPeer));
  exports.Set("malloc", Napi::Function::New(env, Malloc));
  exports.Set("free", Napi::Function::New(env, Free));
  exports.Set("upload", Napi::Function::New(env, Upload));
  exports.Set("download", Napi::Function::New(env, Download));
  exports.Set("memset", Napi::Function::New(env, Memset));
  exports.Set("copy", Napi::Function::New(env, Copy));
  exports.Set("sync", Napi::Function::New(env, Sync));
  exports.Set("memInfo", Napi::Function::New(env, MemInfo));
  exports.Set("resetPeak", Napi::Function::New(env, ResetPeak));
  exports.Set("launch", Napi::Function::New(env, Launch));
  exports.Set("kernels", Napi::Function::New(env, Kernels));
  exports.Set("deviceName", Napi::Function::New(env, DeviceName));
  exports.Set("capability", Napi::Function::New(env, Capability));
  exports.Set("ncclProbe", Napi::Function::New(env, NcclProbe));
  exports.Set("ncclUniqueId", Napi::Function::New(env, NcclUniqueId));
  exports.Set("ncclCommInit", Napi::Function::New(env, NcclCommInit));
  exports.Set("ncclAllReduce", Napi::Function::New(env, NcclAllReduce));
  exports.Set("ncclBroadcast", Napi::Function::New(env, NcclBroadcast));
  exports.Set("ncclCommDestroy", Napi::Function::New(env, NcclCommDestroy));
  return exports;
}

}  // namespace

NODE_API_MODULE(rmas_cuda, Module)
