// Run-time loading of NCCL (see nccl.h for why and for the checked declarations). RMAS_NCCL=<path> names the
// library file, and then only that file is tried: a path given on purpose that does not load is an error to show,
// not a reason to pick some other NCCL. Otherwise libnccl.so.2 (NVIDIA's libnccl2 package, or NCCL on
// LD_LIBRARY_PATH); the emulator build (native/cuda/emu) loads its own NCCL, libnccl_emu.so, from beside the addon.
#include "nccl.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "dynlib.h"

namespace rmas::nccl {
namespace {

dynlib::Library<Api> g_lib;
int g_version = -1;

std::vector<std::string> candidates() {
  if (const char* env = std::getenv("RMAS_NCCL"); env && *env) return {env};
  std::vector<std::string> names;
#ifdef RMAS_CUDA_EMU
  // never a real NCCL here: the emulator's device pointers are host memory
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&candidates), &self) && self.dli_fname) {
    std::string dir = self.dli_fname;
    dir = dir.substr(0, dir.find_last_of('/') + 1);
    names.push_back(dir + "libnccl_emu.so");
  }
#else
  names.push_back("libnccl.so.2");
#endif
  return names;
}

void load() {
  std::string tried;
  const bool chosen = std::getenv("RMAS_NCCL") && *std::getenv("RMAS_NCCL");
  Api& f = g_lib.fns;
  const bool ok = g_lib.open(candidates(), [&f](void* lib, std::string& missing) {
    dynlib::sym(lib, "ncclGetVersion", f.getVersion, &missing);
    dynlib::sym(lib, "ncclGetUniqueId", f.getUniqueId, &missing);
    dynlib::sym(lib, "ncclCommInitRank", f.commInitRank, &missing);
    dynlib::sym(lib, "ncclCommDestroy", f.commDestroy, &missing);
    dynlib::sym(lib, "ncclAllReduce", f.allReduce, &missing);
    dynlib::sym(lib, "ncclBroadcast", f.broadcast, &missing);
    dynlib::sym(lib, "ncclGetErrorString", f.getErrorString, &missing);
    dynlib::sym(lib, "ncclGetLastError", f.getLastError, nullptr);
  }, tried);
  if (ok) {
    int v = 0;
    g_version = f.getVersion(&v) == kSuccess ? v : -1;
    return;
  }
  g_lib.error = "NCCL not found (" + tried + "); " +
                (chosen ? "RMAS_NCCL must name a loadable libnccl.so.2 (NVIDIA's libnccl2), or be unset"
                        : "install NCCL (Debian/Ubuntu: libnccl2 from NVIDIA's CUDA repository) or set RMAS_NCCL=<path to libnccl.so.2>");
}

const char* resultName(Result r) {
  switch (r) {
    case 0: return "ncclSuccess";
    case 1: return "ncclUnhandledCudaError";
    case 2: return "ncclSystemError";
    case 3: return "ncclInternalError";
    case 4: return "ncclInvalidArgument";
    case 5: return "ncclInvalidUsage";
    case 6: return "ncclRemoteError";
    case 7: return "ncclInProgress";
    default: return "ncclUnknownResult";
  }
}

}  // namespace

const Api* api() { return g_lib.get(load); }

const char* loaded_path() { return g_lib.path(load); }

const char* load_error() { return g_lib.why(load); }

int version() {
  api();
  return g_version;
}

std::string describe(Result r, Comm comm) {
  std::string s = std::string(resultName(r)) + " (" + std::to_string(r) + ")";
  const Api* a = api();
  if (!a) return s;
  if (const char* text = a->getErrorString(r); text && *text) s += std::string(": ") + text;
  if (a->getLastError) {
    if (const char* last = a->getLastError(comm); last && *last) s += std::string("; ") + last;
  }
  return s;
}

}  // namespace rmas::nccl
