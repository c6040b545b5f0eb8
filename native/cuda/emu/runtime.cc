// The CUDA emulator's runtime: devices, memory, streams and kernel execution on the CPU (see emu.h for the
// execution model). Configured by the environment, read once:
//   RMAS_CUDA_EMU_DEVICES  number of devices (default 1; 0 makes cudaGetDeviceCount fail with
//                          cudaErrorNoDevice, as a machine without a GPU does)
//   RMAS_CUDA_EMU_MEMORY   bytes per device (default 16 GiB); an allocation past it fails with
//                          cudaErrorMemoryAllocation, as a full GPU does
//   RMAS_CUDA_EMU_CC       compute capability, "9.0" by default
//   RMAS_CUDA_EMU_ORDER    forward (default) or reverse: the order in which runnable threads are resumed
//   RMAS_CUDA_EMU_DRYRUN   1: launches are checked (configuration, shared memory) and not run, and new memory is
//                          not filled, so real sizes cost address space, not time or RAM; results are garbage
//
// Checks a GPU makes (or fails on without saying why), made here with a reason:
//   - launch configurations (block and grid limits, dynamic shared memory over 48 KiB without the opt-in
//     attribute, over the device's opt-in limit with it): cudaErrorInvalidConfiguration / InvalidValue;
//   - barrier divergence, shuffles over exited or missing lanes: cudaErrorLaunchFailure;
//   - an access past the end of an allocation: every allocation ends at most 255 bytes (guard bytes, for
//     writes) before an inaccessible page, so a kernel that reads or writes beyond that faults; the fault is
//     caught, the launch fails with cudaErrorIllegalAddress (sticky, as on a GPU) saying which allocation and
//     whether it was a read or a write. So does any other fault in a kernel (a null or wild pointer, a fiber's
//     stack overflow). Writes into the guard bytes on either side are found after every launch and at free;
//   - copies and memsets that leave their allocation: cudaErrorInvalidValue.
// New allocations and new dynamic shared memory are filled with 0xff bytes (f32 NaN), so a kernel that
// reads memory it never wrote shows NaN instead of a lucky zero.
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime.h>

struct CUstream_st {
  int device;
};
struct CUevent_st {
  int device;
};
struct CUmemPoolHandle_st {
  int device;
};

namespace {

constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xa5;
constexpr size_t kStaticSmem = 48 * 1024;

struct Config {
  int devices = 1;
  size_t memory = size_t(16) << 30;
  int major = 9, minor = 0;
  bool reverse = false;
  bool dryRun = false;
  Config() {
    if (const char* v = std::getenv("RMAS_CUDA_EMU_DEVICES")) devices = std::atoi(v);
    if (const char* v = std::getenv("RMAS_CUDA_EMU_MEMORY")) memory = size_t(std::strtoull(v, nullptr, 10));
    if (const char* v = std::getenv("RMAS_CUDA_EMU_CC")) std::sscanf(v, "%d.%d", &major, &minor);
    if (const char* v = std::getenv("RMAS_CUDA_EMU_ORDER")) reverse = std::string(v) == "reverse";
    if (const char* v = std::getenv("RMAS_CUDA_EMU_DRYRUN")) dryRun = std::string(v) == "1";
  }
  size_t optinSmem() const { return major >= 9 ? 227 * 1024 : major == 8 && minor == 0 ? 163 * 1024 : 99 * 1024; }
};

const Config& config() {
  static const Config c;
  return c;
}

/**
 * An allocation: its own mapping, [front guard bytes][bytes][tail guard bytes to a 256-byte boundary][no-access page],
 * the data 256-byte aligned and ending right before the page, as closely as that alignment allows.
 */
struct Alloc {
  int device;
  size_t bytes;
  uint8_t* base;  // the front guard bytes (kGuard before the data)
  uint8_t* map;
  size_t mapped;
};

struct State {
  std::mutex mu;
  int current = 0;
  cudaError_t last = cudaSuccess;
  cudaError_t sticky = cudaSuccess;
  std::string detail;  // why the call that returned detailCode failed, for cudaGetErrorString
  cudaError_t detailCode = cudaSuccess;
  std::map<uintptr_t, Alloc> allocs;
  std::vector<size_t> used, high;
  std::map<const void*, int> smemOptin;
  std::vector<CUmemPoolHandle_st> pools;
  State() : used(64), high(64), pools(64) {
    for (int i = 0; i < 64; i++) pools[i].device = i;
  }
};

State& st() {
  static State s;
  return s;
}

cudaError_t fail(cudaError_t e) {
  auto& s = st();
  s.last = e;
  if (!s.sticky) s.detailCode = cudaSuccess;  // a plain failure: the runtime's own text
  return e;
}

/** Records why a call fails with `e`, which cudaGetErrorString(e) then says. */
void explain(cudaError_t e, std::string why) {
  auto& s = st();
  s.detail = std::move(why);
  s.detailCode = e;
}

/** A fault that corrupts the device context, as on a GPU: every later call fails with `e`, explained by `why`. */
void stick(cudaError_t e, std::string why) {
  explain(e, std::move(why));
  st().sticky = st().last = e;
}

bool validDevice(int d) { return d >= 0 && d < config().devices && d < 64; }

size_t roundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

/** An allocation's data and tail guard bytes: its size up to a 256-byte boundary (at least one). */
size_t bodyBytes(size_t bytes) { return roundUp(bytes ? bytes : 1, kGuard); }

/** The allocation holding [p, p + bytes), or nullptr. */
const Alloc* find(const void* p, size_t bytes) {
  auto& s = st();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocs.upper_bound(a);
  if (it == s.allocs.begin()) return nullptr;
  --it;
  if (a + bytes > it->first + it->second.bytes) return nullptr;
  return &it->second;
}

bool guardsIntact(uintptr_t p, const Alloc& a) {
  const uint8_t* lo = a.base;
  const uint8_t* hi = reinterpret_cast<const uint8_t*>(p) + a.bytes;
  const size_t tail = bodyBytes(a.bytes) - a.bytes;
  for (size_t i = 0; i < kGuard; i++)
    if (lo[i] != kGuardByte) return false;
  for (size_t i = 0; i < tail; i++)
    if (hi[i] != kGuardByte) return false;
  return true;
}

/** After a launch: a write outside any allocation's bounds corrupts the device context, as on a GPU. */
void checkGuards(const char* kernel) {
  auto& s = st();
  for (const auto& [p, a] : s.allocs) {
    if (guardsIntact(p, a)) continue;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "illegal address (emulator): kernel %s wrote outside the %zu-byte allocation at 0x%llx on device %d", kernel, a.bytes,
                  (unsigned long long)p, a.device);
    stick(cudaErrorIllegalAddress, buf);
    return;
  }
}

const char* name(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
  }
}

const char* text(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
  }
}

}  // namespace

// ---- errors, devices ----

const char* cudaGetErrorName(cudaError_t e) { return name(e); }
const char* cudaGetErrorString(cudaError_t e) {
  auto& s = st();
  // the emulator knows why the call failed: say it
  if (e != cudaSuccess && e == s.detailCode && !s.detail.empty()) return s.detail.c_str();
  return text(e);
}
cudaError_t cudaGetLastError() {
  auto& s = st();
  const cudaError_t e = s.sticky != cudaSuccess ? s.sticky : s.last;
  s.last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return st().sticky != cudaSuccess ? st().sticky : st().last; }
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 0;
  if (config().devices <= 0) return fail(cudaErrorNoDevice);
  *count = std::min(config().devices, 64);
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "rmas CUDA emulator (CPU) %d", device);
  p->totalGlobalMem = config().memory;
  p->sharedMemPerBlock = kStaticSmem;
  p->sharedMemPerBlockOptin = config().optinSmem();
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = config().major, p->minor = config().minor;
  p->multiProcessorCount = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (config().devices <= 0) return fail(cudaErrorNoDevice);
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  st().current = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = st().current;
  return cudaSuccess;
}

// ---- streams and events: everything is synchronous, so they only carry their device ----

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st{st().current};
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return st().sticky; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) { return e ? st().sticky : fail(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = new CUevent_st{st().current};
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return fail(cudaErrorInvalidResourceHandle);
  // as on a GPU: an event is recorded on a stream of its own device
  if (s && s->device != e->device) return fail(cudaErrorInvalidResourceHandle);
  return st().sticky;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}

// ---- memory ----

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  auto& s = st();
  if (s.sticky) return s.sticky;
  *p = nullptr;
  const int device = stream ? stream->device : s.current;
  if (bytes > config().memory || s.used[device] + bytes > config().memory) return fail(cudaErrorMemoryAllocation);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t body = bodyBytes(bytes);
  const size_t span = roundUp(kGuard + body, page);
  void* m = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
  auto* map = static_cast<uint8_t*>(m);
  mprotect(map + span, page, PROT_NONE);
  uint8_t* data = map + span - body;
  std::memset(data - kGuard, kGuardByte, kGuard);
  if (!config().dryRun) std::memset(data, 0xff, bytes);
  std::memset(data + bytes, kGuardByte, body - bytes);
  *p = data;
  s.allocs[reinterpret_cast<uintptr_t>(*p)] = Alloc{device, bytes, data - kGuard, map, span + page};
  s.used[device] += bytes;
  s.high[device] = std::max(s.high[device], s.used[device]);
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
  auto& s = st();
  auto it = s.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocs.end()) return fail(cudaErrorInvalidValue);
  if (!guardsIntact(it->first, it->second) && !s.sticky)
    stick(cudaErrorIllegalAddress,
          "illegal address (emulator): a kernel wrote outside an allocation freed now (" + std::to_string(it->second.bytes) + " bytes)");
  munmap(it->second.map, it->second.mapped);
  s.used[it->second.device] -= it->second.bytes;
  s.allocs.erase(it);
  return s.sticky;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  auto& s = st();
  if (s.sticky) return s.sticky;
  const bool dDev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool sDev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault) return fail(cudaErrorInvalidValue);
  if ((dDev && !find(dst, bytes)) || (sDev && !find(src, bytes))) return fail(cudaErrorInvalidValue);
  if (config().dryRun && kind != cudaMemcpyDeviceToHost) return cudaSuccess;  // device contents do not matter
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t bytes, cudaStream_t) {
  auto& s = st();
  if (s.sticky) return s.sticky;
  const Alloc* d = find(dst, bytes);
  const Alloc* f = find(src, bytes);
  if (!validDevice(dstDevice) || !validDevice(srcDevice)) return fail(cudaErrorInvalidDevice);
  if (!d || !f || d->device != dstDevice || f->device != srcDevice) return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  auto& s = st();
  if (s.sticky) return s.sticky;
  if (!find(p, bytes)) return fail(cudaErrorInvalidValue);
  if (!config().dryRun) std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  auto& s = st();
  *total = config().memory;
  *free = config().memory - s.used[s.current];
  return s.sticky;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  *pool = &st().pools[device];
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!pool || !value) return fail(cudaErrorInvalidValue);
  // the high-water marks can only be reset, to zero, which restarts them from what is in use now
  if (attr == cudaMemPoolAttrUsedMemHigh || attr == cudaMemPoolAttrReservedMemHigh) {
    if (*static_cast<const uint64_t*>(value) != 0) return fail(cudaErrorInvalidValue);
    st().high[pool->device] = st().used[pool->device];
  }
  return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!pool) return fail(cudaErrorInvalidValue);
  auto& s = st();
  const int d = pool->device;
  uint64_t v = 0;
  // the addon sets the release threshold to the maximum, so a real pool keeps what it ever held: reserved = high water
  if (attr == cudaMemPoolAttrUsedMemCurrent) v = s.used[d];
  else if (attr == cudaMemPoolAttrReservedMemCurrent || attr == cudaMemPoolAttrUsedMemHigh || attr == cudaMemPoolAttrReservedMemHigh)
    v = s.high[d];
  else if (attr == cudaMemPoolAttrReleaseThreshold) v = UINT64_MAX;
  else return fail(cudaErrorInvalidValue);
  *static_cast<uint64_t*>(value) = v;
  return cudaSuccess;
}

// ---- kernels ----

namespace rmas_emu {

cudaError_t func_set_attribute(const void* fn, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || size_t(value) > config().optinSmem()) return fail(cudaErrorInvalidValue);
  st().smemOptin[fn] = value;
  return cudaSuccess;
}

// Fibers: x86-64 gets a small switch of its own (callee-saved registers, MXCSR and the x87 control word);
// elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void rmas_emu_switch(void** save, void* next);
extern "C" void rmas_emu_trampoline();
asm(R"(
  .text
  .globl rmas_emu_switch
  .hidden rmas_emu_switch
  .type rmas_emu_switch,@function
rmas_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size rmas_emu_switch,.-rmas_emu_switch
  .globl rmas_emu_trampoline
  .hidden rmas_emu_trampoline
  .type rmas_emu_trampoline,@function
rmas_emu_trampoline:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size rmas_emu_trampoline,.-rmas_emu_trampoline
)");
#else
}  // namespace rmas_emu
#include <ucontext.h>
namespace rmas_emu {
#endif

namespace {

constexpr size_t kStack = 128 * 1024;
constexpr int kMaxThreads = 1024;

/** From one fiber stack to the next: the stack and the no-access page below it. */
size_t stackStride() { return kStack + size_t(sysconf(_SC_PAGESIZE)); }

enum class Wait { None, Block, Warp, Done };

struct Fiber {
  void* sp = nullptr;
#if !defined(__x86_64__)
  ucontext_t uc;
#endif
  uint3 tid{};
  int warp = 0, lane = 0;
  Wait wait = Wait::None;
  unsigned gen = 0;  // the generation of the barrier it waits on
};

struct WarpState {
  int size = 0, waiting = 0, done = 0;
  unsigned gen = 0;
  uint64_t slot[32];
};

struct Grid {
  // the barrier the block's threads gather at now: where the first arrival called it from
  const char* barrierFile = nullptr;
  int barrierLine = 0;
  uint64_t block = 0;  // serial number of the running block, for poison_shared
  void (*entry)(void*) = nullptr;
  void* ctx = nullptr;
  const char* kernel = "";
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  int n = 0, waiting = 0, done = 0;
  unsigned gen = 0;
  Fiber* cur = nullptr;
  void* schedSp = nullptr;
#if !defined(__x86_64__)
  ucontext_t schedUc;
#endif
  std::string error;  // set by a fiber: the launch fails
  std::vector<uint8_t> smem;
};

Grid* g_grid = nullptr;
uint8_t* g_stacks = nullptr;

// A fault inside a kernel: the handler (installed around each grid) describes it and jumps back to run_grid.
sigjmp_buf g_faultJump;
volatile sig_atomic_t g_inGrid = 0;
pthread_t g_gridThread;
char g_fault[384];
struct sigaction g_prevSegv, g_prevBus;

void describeFault(uintptr_t a, bool write) {
  const char* what = write ? "wrote" : "read";
  const char* kernel = g_grid ? g_grid->kernel : "?";
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  auto& s = st();
  auto it = s.allocs.upper_bound(a);
  if (it != s.allocs.begin()) {
    --it;
    const uintptr_t end = it->first + bodyBytes(it->second.bytes);
    if (a >= end && a < end + page) {
      std::snprintf(g_fault, sizeof g_fault,
                    "illegal address (emulator): kernel %s %s byte %llu of the %zu-byte allocation "
                    "at 0x%llx on device %d (past its end)",
                    kernel, what, (unsigned long long)(a - it->first), it->second.bytes, (unsigned long long)it->first, it->second.device);
      return;
    }
  }
  if (g_stacks) {
    const size_t each = stackStride();
    if (a >= uintptr_t(g_stacks) && a < uintptr_t(g_stacks) + each * kMaxThreads && (a - uintptr_t(g_stacks)) % each < page) {
      std::snprintf(g_fault, sizeof g_fault,
                    "illegal address (emulator): kernel %s overflowed a thread's %zu KiB stack (large local arrays?)", kernel,
                    kStack / 1024);
      return;
    }
  }
  std::snprintf(g_fault, sizeof g_fault, "illegal address (emulator): kernel %s %s address 0x%llx, outside every allocation", kernel, what,
                (unsigned long long)a);
}

void onFault(int sig, siginfo_t* si, void* uc) {
  if (g_inGrid && pthread_equal(pthread_self(), g_gridThread)) {
    bool write = false;
#if defined(__x86_64__)
    write = (static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
    describeFault(reinterpret_cast<uintptr_t>(si->si_addr), write);
    g_inGrid = 0;
    siglongjmp(g_faultJump, 1);
  }
  // not a kernel's: whoever handled it before (V8's own trap handling, or the default)
  const struct sigaction& prev = sig == SIGSEGV ? g_prevSegv : g_prevBus;
  if (prev.sa_flags & SA_SIGINFO) {
    prev.sa_sigaction(sig, si, uc);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

/** Catches faults of the kernel threads for the lifetime of one grid, on an alternate stack (a fiber may overflow). */
struct FaultGuard {
  stack_t prevStack{};
  FaultGuard() {
    static std::vector<uint8_t> alt(256 * 1024);  // launches run one at a time (the runtime's mutex)
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, &prevStack);
    struct sigaction sa{};
    sa.sa_sigaction = onFault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_prevSegv);
    sigaction(SIGBUS, &sa, &g_prevBus);
    g_gridThread = pthread_self();
  }
  ~FaultGuard() {
    g_inGrid = 0;
    sigaction(SIGSEGV, &g_prevSegv, nullptr);
    sigaction(SIGBUS, &g_prevBus, nullptr);
    sigaltstack(&prevStack, nullptr);
  }
};
uint64_t g_blockSerial = 0;
std::map<void*, uint64_t> g_poisoned;  // static shared array -> the block that last poisoned it

uint8_t* stacks() {
  if (g_stacks) return g_stacks;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t each = stackStride();
  void* m = mmap(nullptr, each * kMaxThreads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    std::fprintf(stderr, "rmas CUDA emulator: cannot map %zu bytes of fiber stacks\n", each * kMaxThreads);
    std::abort();
  }
  g_stacks = static_cast<uint8_t*>(m);
  for (int i = 0; i < kMaxThreads; i++) mprotect(g_stacks + i * each, page, PROT_NONE);
  return g_stacks;
}

void toScheduler(Fiber& f) {
#if defined(__x86_64__)
  rmas_emu_switch(&f.sp, g_grid->schedSp);
#else
  swapcontext(&f.uc, &g_grid->schedUc);
#endif
}

void resume(Grid& g, Fiber& f) {
  threadIdx = f.tid;
  g.cur = &f;
#if defined(__x86_64__)
  rmas_emu_switch(&g.schedSp, f.sp);
#else
  swapcontext(&g.schedUc, &f.uc);
#endif
}

void fiberMain(void*) {
  Grid& g = *g_grid;
  Fiber& f = *g.cur;
  g.entry(g.ctx);
  f.wait = Wait::Done;
  g.done++;
  WarpState& w = g.warps[f.warp];
  w.done++;
  // threads that exit count as arrived at a block barrier
  if (g.waiting && g.waiting + g.done == g.n) {
    g.gen++, g.waiting = 0;
    for (Fiber& o : g.fibers)
      if (o.wait == Wait::Block) o.wait = Wait::None;
  }
  if (w.waiting && g.error.empty())
    g.error =
        "a warp shuffle in kernel " + std::string(g.kernel) + " names a lane that has exited (thread " + std::to_string(f.tid.x) + ")";
  for (;;) toScheduler(f);
}

#if !defined(__x86_64__)
void fiberMainUc() { fiberMain(nullptr); }
#endif

void start(Fiber& f, uint8_t* stackLo) {
  f.wait = Wait::None;
#if defined(__x86_64__)
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stackLo + kStack) & ~uintptr_t(15));
  uint64_t* sp = top - 10;  // 16-aligned: mxcsr|fcw, r15, r14, r13, r12, rbx, rbp, return address, pad, pad
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  sp[0] = uint64_t(mxcsr) | (uint64_t(fcw) << 32);
  sp[1] = sp[2] = 0;
  sp[3] = 0;                                          // r13: the argument (unused)
  sp[4] = reinterpret_cast<uint64_t>(&fiberMain);     // r12: the function
  sp[5] = sp[6] = 0;
  sp[7] = reinterpret_cast<uint64_t>(&rmas_emu_trampoline);
  sp[8] = sp[9] = 0;
  f.sp = sp;
#else
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = stackLo;
  f.uc.uc_stack.ss_size = kStack;
  f.uc.uc_link = nullptr;
  makecontext(&f.uc, fiberMainUc, 0);
#endif
}

/** Runs one block to completion; false (with g.error) on barrier misuse. */
bool runBlock(Grid& g, uint8_t* stackBase, size_t each) {
  g.waiting = g.done = 0;
  g.gen = 0;
  g.barrierFile = nullptr;
  g.block = ++g_blockSerial;
  for (auto& w : g.warps) w.waiting = w.done = 0, w.gen = 0;
  for (int i = 0; i < g.n; i++) start(g.fibers[i], stackBase + i * each + (each - kStack));
  const bool reverse = config().reverse;
  while (g.done < g.n) {
    bool progressed = false;
    for (int k = 0; k < g.n; k++) {
      Fiber& f = g.fibers[reverse ? g.n - 1 - k : k];
      if (f.wait != Wait::None) continue;
      resume(g, f);
      progressed = true;
      if (!g.error.empty()) return false;
    }
    if (!progressed) {
      int atBlock = 0, atWarp = 0;
      for (const Fiber& f : g.fibers) atBlock += f.wait == Wait::Block, atWarp += f.wait == Wait::Warp;
      g.error = "barrier deadlock in kernel " + std::string(g.kernel) + ": " + std::to_string(atBlock) +
                " thread(s) wait at __syncthreads, " + std::to_string(atWarp) + " in a warp shuffle, " + std::to_string(g.done) +
                " exited (a barrier under divergent control flow)";
      return false;
    }
  }
  return true;
}

}  // namespace

void sync_block(const char* file, int line) {
  Grid& g = *g_grid;
  Fiber& f = *g.cur;
  if (!g.waiting) g.barrierFile = file, g.barrierLine = line;
  else if ((line != g.barrierLine || std::strcmp(file, g.barrierFile) != 0) && g.error.empty())
    g.error = "divergent __syncthreads in kernel " + std::string(g.kernel) + ": thread " + std::to_string(f.tid.x) + " waits at " +
              file + ":" + std::to_string(line) + ", others at " + g.barrierFile + ":" + std::to_string(g.barrierLine);
  if (!g.error.empty()) {
    toScheduler(f);
    return;
  }
  f.wait = Wait::Block;
  f.gen = g.gen;
  if (++g.waiting + g.done == g.n) {
    g.gen++, g.waiting = 0;
    for (Fiber& o : g.fibers)
      if (o.wait == Wait::Block) o.wait = Wait::None;
  }
  // runs again once released; the scheduler resumes it
  toScheduler(f);
}

namespace {
void warpBarrier(Grid& g, Fiber& f) {
  WarpState& w = g.warps[f.warp];
  f.wait = Wait::Warp;
  if (++w.waiting + w.done == w.size) {
    if (w.done && g.error.empty())
      g.error = "a warp shuffle in kernel " + std::string(g.kernel) + " names lanes that have exited (warp " + std::to_string(f.warp) + ")";
    w.gen++, w.waiting = 0;
    const int first = f.warp * 32;
    for (int i = first; i < first + w.size; i++)
      if (g.fibers[i].wait == Wait::Warp) g.fibers[i].wait = Wait::None;
  }
  toScheduler(f);
}
}  // namespace

uint64_t shuffle(unsigned mask, uint64_t bits, int lane, int mode, int width) {
  Grid& g = *g_grid;
  Fiber& f = *g.cur;
  WarpState& w = g.warps[f.warp];
  if (g.error.empty() && mask != 0xffffffffu)
    g.error = "the emulator supports full-mask warp shuffles only (kernel " + std::string(g.kernel) + ")";
  if (g.error.empty() && w.size != 32)
    g.error = "a full-mask warp shuffle in kernel " + std::string(g.kernel) + " with a partial warp of " + std::to_string(w.size) +
              " threads (blockDim not a multiple of 32)";
  if (g.error.empty() && (width < 1 || width > 32 || (width & (width - 1))))
    g.error = "warp shuffle width " + std::to_string(width) + " is not a power of two up to 32 (kernel " + std::string(g.kernel) + ")";
  if (!g.error.empty()) {
    toScheduler(f);
    return 0;
  }
  w.slot[f.lane] = bits;
  warpBarrier(g, f);
  const int base = f.lane & ~(width - 1), sub = f.lane - base;
  int src = f.lane;
  if (mode == 0) src = base + (lane & (width - 1));
  else if (mode == 1) src = (sub ^ lane) < width ? base + (sub ^ lane) : f.lane;
  else if (mode == 2) src = sub + lane < width ? f.lane + lane : f.lane;
  else src = sub - lane >= 0 ? f.lane - lane : f.lane;
  const uint64_t r = w.slot[src];
  warpBarrier(g, f);  // nobody overwrites a slot before every lane has read
  return r;
}

void* dynamic_smem() { return g_grid->smem.data(); }

void poison_shared(void* p, size_t bytes) {
  uint64_t& last = g_poisoned[p];
  if (last == g_grid->block) return;
  last = g_grid->block;
  std::memset(p, 0xff, bytes);
}

void run_grid(const LaunchConfig& c, void (*entry)(void*), void* ctx) {
  auto& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sticky) return;
  auto bad = [&](cudaError_t e, const std::string& why) {
    explain(e, why + " (emulator; kernel " + c.name + ")");
    s.last = e;
  };
  const uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  if (!threads || !c.grid.x || !c.grid.y || !c.grid.z)
    return bad(cudaErrorInvalidConfiguration, "invalid configuration argument: a zero grid or block dimension");
  if (threads > 1024 || c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64)
    return bad(cudaErrorInvalidConfiguration, "invalid configuration argument: block (" + std::to_string(c.block.x) + ", " +
                                                  std::to_string(c.block.y) + ", " + std::to_string(c.block.z) +
                                                  ") is over the limits (1024 threads; 1024, 1024, 64)");
  if (c.grid.x > 0x7fffffffu || c.grid.y > 65535 || c.grid.z > 65535)
    return bad(cudaErrorInvalidConfiguration, "invalid configuration argument: grid (" + std::to_string(c.grid.x) + ", " +
                                                  std::to_string(c.grid.y) + ", " + std::to_string(c.grid.z) +
                                                  ") is over the limits (2^31 - 1, 65535, 65535)");
  if (c.smem > kStaticSmem) {
    auto it = s.smemOptin.find(c.fn);
    if (it == s.smemOptin.end() || size_t(it->second) < c.smem)
      return bad(cudaErrorInvalidValue, std::to_string(c.smem) +
                                            " bytes of dynamic shared memory without "
                                            "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) at least that large");
  }

  if (config().dryRun) return;  // checked, not run

  Grid g;
  g.entry = entry, g.ctx = ctx, g.kernel = c.name;
  g.n = int(threads);
  g.fibers.resize(g.n);
  g.warps.resize((g.n + 31) / 32);
  for (int i = 0; i < g.n; i++) {
    g.fibers[i].tid = uint3{unsigned(i % c.block.x), unsigned(i / c.block.x % c.block.y), unsigned(i / (c.block.x * c.block.y))};
    g.fibers[i].warp = i / 32, g.fibers[i].lane = i % 32;
  }
  for (size_t w = 0; w < g.warps.size(); w++) g.warps[w].size = std::min(32, g.n - int(w) * 32);
  g.smem.assign(c.smem, 0xff);
  Grid* outer = g_grid;
  g_grid = &g;
  blockDim = c.block, gridDim = c.grid;
  uint8_t* base = stacks();
  const size_t each = stackStride();
  volatile bool ok = true;
  volatile bool faulted = false;
  {
    FaultGuard guard;
    if (sigsetjmp(g_faultJump, 1) == 0) {
      g_inGrid = 1;
      for (unsigned z = 0; ok && z < c.grid.z; z++)
        for (unsigned y = 0; ok && y < c.grid.y; y++)
          for (unsigned x = 0; ok && x < c.grid.x; x++) {
            blockIdx = uint3{x, y, z};
            if (c.smem) std::memset(g.smem.data(), 0xff, c.smem);
            ok = runBlock(g, base, each);
          }
      g_inGrid = 0;
    } else {
      faulted = true;  // the fibers of the faulting block are abandoned
    }
  }
  g_grid = outer;
  if (faulted) return stick(cudaErrorIllegalAddress, g_fault);
  if (!ok) return stick(cudaErrorLaunchFailure, "unspecified launch failure (emulator): " + g.error);
  checkGuards(c.name);
}

}  // namespace rmas_emu
