// An emulated NCCL for the CUDA emulator: the entry points of src/nccl.h, between processes of one machine. Built
// as a plain shared library with g++ and no CUDA headers (scripts/build-cuda-emu.mjs), beside the emulated addon,
// which loads it (src/nccl.cc); RMAS_NCCL=<path> points any build at it.
//
// The emulator's device memory is host memory, so a rank reads and writes its buffers directly. A communicator is
// a POSIX shared-memory segment named from the first 24 bytes of the unique id ("/rmas-nccl-<48 hex digits>"):
// a header (the rank count, a barrier, each rank's pid, a failure flag) and one slot of kSlotBytes per rank. The
// first rank to arrive creates it; a zero-filled segment is a valid empty header, so there is nothing to
// initialize and no creation race. Once every rank has joined, rank 0 unlinks the name: each rank keeps its
// mapping, and nothing is left in /dev/shm however the ranks end.
//
// Collectives run synchronously on the calling thread (the emulator's streams are synchronous; the stream is
// ignored). All-reduce, per chunk of one slot: each rank copies its part into its slot; barrier; each rank sums the
// slots in rank order (slot 0 + slot 1 + ... in f32), so every rank gets the same bits whatever the timing;
// barrier, before the slots are reused. Broadcast: root copies into its slot; barrier; the others copy it out;
// barrier. Only f32 and sum, the subset the addon uses; anything else is ncclInvalidArgument.
//
// A wait never hangs: it fails with ncclRemoteError when a peer's process has exited (checked every 50 ms) or when
// another rank gave up on the communicator, and with ncclSystemError after RMAS_NCCL_EMU_TIMEOUT seconds (default
// 120). A failed communicator fails every later call; ncclGetLastError says what happened.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define NCCL_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4, kInvalidUsage = 5, kRemoteError = 6;
constexpr int kFloat32 = 7, kSum = 0;
constexpr int kVersion = 21900;  // the NCCL 2.19 calls it offers, in ncclGetVersion's encoding
constexpr int kMaxRanks = 256;
constexpr size_t kSlotBytes = size_t(1) << 20;
constexpr size_t kHeaderBytes = 4096;

struct UniqueId {
  char internal[128];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "the header's atomics must work across processes");

/** The start of the segment; all zero when new. */
struct Header {
  std::atomic<uint32_t> nranks;      // set by the first rank to arrive
  std::atomic<uint32_t> arrived;     // ranks in the current barrier
  std::atomic<uint32_t> generation;  // barriers completed
  std::atomic<uint32_t> failed;      // nonzero once a rank gave up: every wait fails
  std::atomic<int32_t> pids[kMaxRanks];
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header outgrew its page");

thread_local std::string t_last;

int fail(int code, const std::string& why) {
  t_last = why;
  return code;
}

}  // namespace

struct ncclComm {
  Header* h = nullptr;
  size_t bytes = 0;
  int rank = 0, nranks = 0;
  std::string name;
  float* slot(int r) const { return reinterpret_cast<float*>(reinterpret_cast<char*>(h) + kHeaderBytes + size_t(r) * kSlotBytes); }
};

namespace {

double timeoutSeconds() {
  const char* v = std::getenv("RMAS_NCCL_EMU_TIMEOUT");
  const double s = v && *v ? std::atof(v) : 0;
  return s > 0 ? s : 120;
}

/** Whether process `pid` still runs (a zombie, exited but not yet reaped, does not). */
bool alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64], buf[512];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return true;
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close = std::strrchr(buf, ')');
  return !(close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X'));
}

/** Marks the communicator failed for every rank, and says why on this one. */
int giveUp(ncclComm* c, int code, const std::string& why) {
  c->h->failed.store(1, std::memory_order_release);
  return fail(code, "rank " + std::to_string(c->rank) + " of " + std::to_string(c->nranks) + ": " + why);
}

/** Waits until every rank has arrived; `what` names the step for the error. */
int barrier(ncclComm* c, const char* what) {
  Header* h = c->h;
  if (h->failed.load(std::memory_order_acquire))
    return fail(kRemoteError, std::string(what) + ": another rank gave up on this communicator earlier");
  const uint32_t gen = h->generation.load(std::memory_order_acquire);
  if (h->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == uint32_t(c->nranks)) {
    h->arrived.store(0, std::memory_order_relaxed);
    h->generation.fetch_add(1, std::memory_order_release);
    return kSuccess;
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto checked = t0;
  const double limit = timeoutSeconds();
  for (long spins = 0; h->generation.load(std::memory_order_acquire) == gen; spins++) {
    if (h->failed.load(std::memory_order_acquire))
      return fail(kRemoteError, std::string(what) + ": rank " + std::to_string(c->rank) + " of " + std::to_string(c->nranks) +
                                    ": another rank gave up on this communicator");
    if (spins < 2000) {
      sched_yield();
      continue;
    }
    usleep(spins < 20000 ? 20 : 200);
    // a peer may complete the barrier and exit while this rank sleeps: that is no failure
    if (h->generation.load(std::memory_order_acquire) != gen) break;
    const auto now = Clock::now();
    if (now - checked > std::chrono::milliseconds(50)) {
      checked = now;
      for (int r = 0; r < c->nranks; r++) {
        const pid_t pid = h->pids[r].load(std::memory_order_acquire);
        // the generation again: the peer may have completed the barrier and exited since the check above
        if (r != c->rank && pid > 0 && !alive(pid) && h->generation.load(std::memory_order_acquire) == gen)
          return giveUp(c, kRemoteError,
                        std::string(what) + ": rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") has exited");
      }
      if (std::chrono::duration<double>(now - t0).count() > limit) {
        std::string missing;
        for (int r = 0; r < c->nranks; r++)
          if (h->pids[r].load(std::memory_order_acquire) <= 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        return giveUp(c, kSystemError,
                      std::string(what) + ": the other ranks did not arrive within " + std::to_string(int(limit)) + " s" +
                          (missing.empty() ? "" : " (never joined: rank " + missing + ")") + " (RMAS_NCCL_EMU_TIMEOUT)");
      }
    }
  }
  return kSuccess;
}

void closeComm(ncclComm* c, bool unlink) {
  if (c->h) munmap(c->h, c->bytes);
  if (unlink) shm_unlink(c->name.c_str());
  delete c;
}

}  // namespace

NCCL_API int ncclGetVersion(int* version) {
  if (!version) return fail(kInvalidArgument, "ncclGetVersion: null version pointer");
  *version = kVersion;
  return kSuccess;
}

NCCL_API int ncclGetUniqueId(UniqueId* id) {
  if (!id) return fail(kInvalidArgument, "ncclGetUniqueId: null id pointer");
  size_t got = 0;
  while (got < sizeof id->internal) {
    const ssize_t n = getrandom(id->internal + got, sizeof id->internal - got, 0);
    if (n < 0 && errno != EINTR) return fail(kSystemError, std::string("ncclGetUniqueId: getrandom: ") + std::strerror(errno));
    if (n > 0) got += size_t(n);
  }
  return kSuccess;
}

NCCL_API int ncclCommInitRank(ncclComm** out, int nranks, UniqueId id, int rank) {
  if (!out) return fail(kInvalidArgument, "ncclCommInitRank: null communicator pointer");
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    return fail(kInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                      " (the emulator takes 1 to " + std::to_string(kMaxRanks) + " ranks)");
  auto* c = new ncclComm;
  c->rank = rank, c->nranks = nranks;
  c->name = "/rmas-nccl-";
  for (int i = 0; i < 24; i++) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", unsigned(static_cast<unsigned char>(id.internal[i])));
    c->name += hex;
  }
  c->bytes = kHeaderBytes + size_t(nranks) * kSlotBytes;
  const int fd = shm_open(c->name.c_str(), O_CREAT | O_RDWR, 0600);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || (size_t(st.st_size) < c->bytes && ftruncate(fd, off_t(c->bytes)) != 0)) {
    const std::string why = std::string("ncclCommInitRank: shared memory ") + c->name + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    closeComm(c, false);
    return fail(kSystemError, why);
  }
  void* p = mmap(nullptr, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    const std::string why = std::string("ncclCommInitRank: mmap of ") + c->name + ": " + std::strerror(errno);
    c->h = nullptr;
    closeComm(c, false);
    return fail(kSystemError, why);
  }
  c->h = static_cast<Header*>(p);
  uint32_t want = 0;
  if (!c->h->nranks.compare_exchange_strong(want, uint32_t(nranks)) && want != uint32_t(nranks)) {
    giveUp(c, kInvalidArgument, "");
    closeComm(c, true);
    return fail(kInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " was given " + std::to_string(nranks) +
                                      " ranks, but another rank made this communicator with " + std::to_string(want));
  }
  int32_t none = 0;
  if (!c->h->pids[rank].compare_exchange_strong(none, int32_t(getpid()))) {
    giveUp(c, kInvalidUsage, "");
    closeComm(c, true);
    return fail(kInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " joined twice (pids " + std::to_string(none) +
                                   " and " + std::to_string(getpid()) + ")");
  }
  if (const int r = barrier(c, "ncclCommInitRank"); r != kSuccess) {
    closeComm(c, true);
    return r;
  }
  // every rank has mapped the segment: its name is no longer needed
  if (rank == 0) shm_unlink(c->name.c_str());
  *out = c;
  return kSuccess;
}

NCCL_API int ncclCommDestroy(ncclComm* c) {
  if (!c) return fail(kInvalidArgument, "ncclCommDestroy: null communicator");
  closeComm(c, false);
  return kSuccess;
}

/** The checks both collectives share; kSuccess when the call may go ahead. */
static int admit(const char* what, const void* send, void* recv, size_t count, int dtype, ncclComm* c) {
  if (!c || !c->h) return fail(kInvalidArgument, std::string(what) + ": null communicator");
  if (dtype != kFloat32)
    return fail(kInvalidArgument, std::string(what) + ": the emulator supports ncclFloat32 (7) only, got " + std::to_string(dtype));
  if (count && (!send || !recv)) return fail(kInvalidArgument, std::string(what) + ": null buffer");
  if (c->h->failed.load(std::memory_order_acquire))
    return fail(kRemoteError, std::string(what) + ": this communicator failed earlier (a rank gave up); destroy it");
  return kSuccess;
}

NCCL_API int ncclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, ncclComm* c, void* /*stream*/) {
  if (const int r = admit("ncclAllReduce", send, recv, count, dtype, c); r != kSuccess) return r;
  if (op != kSum) return fail(kInvalidArgument, "ncclAllReduce: the emulator supports ncclSum (0) only, got " + std::to_string(op));
  const size_t chunk = kSlotBytes / sizeof(float);
  const float* in = static_cast<const float*>(send);
  float* out = static_cast<float*>(recv);
  // count 0 still meets the others, as every rank must make the same calls
  for (size_t k = 0, chunks = count ? (count + chunk - 1) / chunk : 1; k < chunks; k++) {
    const size_t at = k * chunk, n = count - at < chunk ? count - at : chunk;
    std::memcpy(c->slot(c->rank), in + at, n * sizeof(float));
    if (const int r = barrier(c, "ncclAllReduce"); r != kSuccess) return r;
    const float* s0 = c->slot(0);
    for (size_t i = 0; i < n; i++) out[at + i] = s0[i];
    for (int r = 1; r < c->nranks; r++) {
      const float* s = c->slot(r);
      for (size_t i = 0; i < n; i++) out[at + i] += s[i];
    }
    if (const int r = barrier(c, "ncclAllReduce"); r != kSuccess) return r;
  }
  return kSuccess;
}

NCCL_API int ncclBroadcast(const void* send, void* recv, size_t count, int dtype, int root, ncclComm* c, void* /*stream*/) {
  if (const int r = admit("ncclBroadcast", send, recv, count, dtype, c); r != kSuccess) return r;
  if (root < 0 || root >= c->nranks)
    return fail(kInvalidArgument, "ncclBroadcast: root " + std::to_string(root) + " of " + std::to_string(c->nranks) + " ranks");
  const size_t chunk = kSlotBytes / sizeof(float);
  const float* in = static_cast<const float*>(send);
  float* out = static_cast<float*>(recv);
  if (c->rank == root && in != out && count) std::memmove(out, in, count * sizeof(float));
  for (size_t k = 0, chunks = count ? (count + chunk - 1) / chunk : 1; k < chunks; k++) {
    const size_t at = k * chunk, n = count - at < chunk ? count - at : chunk;
    if (c->rank == root) std::memcpy(c->slot(root), out + at, n * sizeof(float));
    if (const int r = barrier(c, "ncclBroadcast"); r != kSuccess) return r;
    if (c->rank != root) std::memcpy(out + at, c->slot(root), n * sizeof(float));
    if (const int r = barrier(c, "ncclBroadcast"); r != kSuccess) return r;
  }
  return kSuccess;
}

NCCL_API const char* ncclGetErrorString(int result) {
  switch (result) {
    case kSuccess: return "the call succeeded";
    case 1: return "a CUDA call failed";
    case kSystemError: return "a system call failed or a wait ran out of time";
    case kInternalError: return "the emulated NCCL broke its own rules";
    case kInvalidArgument: return "an argument is not acceptable";
    case kInvalidUsage: return "the calls were made in a way NCCL does not allow";
    case kRemoteError: return "another rank failed or went away";
    case 7: return "the operation has not finished yet";
    default: return "a result code the emulated NCCL does not know";
  }
}

NCCL_API const char* ncclGetLastError(ncclComm* /*comm*/) { return t_last.c_str(); }
