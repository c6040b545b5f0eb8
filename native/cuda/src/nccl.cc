// Run-time loading of NCCL (see nccl.h for why and for the checked declarations). RMAS_NCCL=<path> names the
// library file, and then only that file is tried: a path given on purpose that does not load is an error to show,
// not a reason to pick some other NCCL. Otherwise libnccl.so.2 (NVIDIA's libnccl2 package, or NCCL on
// LD_LIBRARY_PATH); the emulator build (native/cuda/emu) loads its own NCCL, libnccl_emu.so, from beside the addon.
#include "nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace rmas::nccl {
namespace {

Api g_api{};
bool g_loaded = false;
int g_version = -1;
std::string g_path;
std::string g_error;
std::once_flag g_once;

template <typename F>
void sym(void* lib, const char* name, F& out, std::string* missing) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out && missing) *missing += missing->empty() ? name : std::string(", ") + name;
}

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
  for (const std::string& name : candidates()) {
    const char* n = name.c_str();
    void* lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (e ? e : n);
      continue;
    }
    std::string missing;
    sym(lib, "ncclGetVersion", g_api.getVersion, &missing);
    sym(lib, "ncclGetUniqueId", g_api.getUniqueId, &missing);
    sym(lib, "ncclCommInitRank", g_api.commInitRank, &missing);
    sym(lib, "ncclCommDestroy", g_api.commDestroy, &missing);
    sym(lib, "ncclAllReduce", g_api.allReduce, &missing);
    sym(lib, "ncclBroadcast", g_api.broadcast, &missing);
    sym(lib, "ncclGetErrorString", g_api.getErrorString, &missing);
    sym(lib, "ncclGetLastError", g_api.getLastError, nullptr);
    if (!missing.empty()) {
      tried += std::string(tried.empty() ? "" : "; ") + n + " lacks " + missing;
      dlclose(lib);
      g_api = Api{};
      continue;
    }
    char buf[4096];
    g_path = n;
    if (name.find('/') == std::string::npos && dlinfo(lib, RTLD_DI_ORIGIN, buf) == 0) g_path = std::string(buf) + "/" + n;
    int v = 0;
    g_version = g_api.getVersion(&v) == kSuccess ? v : -1;
    g_loaded = true;
    g_error.clear();
    return;
  }
  g_error = "NCCL not found (" + tried + "); " +
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

const Api* api() {
  std::call_once(g_once, load);
  return g_loaded ? &g_api : nullptr;
}

const char* loaded_path() {
  api();
  return g_loaded ? g_path.c_str() : nullptr;
}

const char* load_error() {
  api();
  return g_error.c_str();
}

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
