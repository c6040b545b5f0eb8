// Run-time loading of cuBLASLt (see cublaslt.h for why and for the checked declarations). RMAS_CUBLASLT=<path>
// picks a library file; the emulation build (native/cuda/emu) loads its CPU cuBLASLt from beside the addon.
#include "cublaslt.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace rmas::lt {
namespace {

Api g_api{};
bool g_loaded = false;
std::string g_path;
std::string g_error;
std::once_flag g_once;
thread_local std::string t_detail;

template <typename F>
bool sym(void* lib, const char* name, F& out, std::string& missing) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) missing += missing.empty() ? name : std::string(", ") + name;
  return out != nullptr;
}

/** Where to look: RMAS_CUBLASLT (a path) first; the emulation build's CPU cuBLASLt beside the addon; the CUDA releases. */
std::vector<std::string> candidates() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("RMAS_CUBLASLT"); env && *env) names.push_back(env);
#ifdef RMAS_CUDA_EMU
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&candidates), &self) && self.dli_fname) {
    std::string dir = self.dli_fname;
    dir = dir.substr(0, dir.find_last_of('/') + 1);
    names.push_back(dir + "libcublasLt_emu.so");
  }
#else
  for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}) names.push_back(n);
#endif
  return names;
}

void load() {
  std::string tried;
  for (const std::string& name : candidates()) {
    const char* n = name.c_str();
    void* lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (e ? e : n);
      continue;
    }
    std::string missing;
    sym(lib, "cublasLtCreate", g_api.create, missing);
    sym(lib, "cublasLtDestroy", g_api.destroy, missing);
    sym(lib, "cublasLtGetVersion", g_api.getVersion, missing);
    sym(lib, "cublasLtMatmulDescCreate", g_api.matmulDescCreate, missing);
    sym(lib, "cublasLtMatmulDescDestroy", g_api.matmulDescDestroy, missing);
    sym(lib, "cublasLtMatmulDescSetAttribute", g_api.matmulDescSetAttribute, missing);
    sym(lib, "cublasLtMatrixLayoutCreate", g_api.matrixLayoutCreate, missing);
    sym(lib, "cublasLtMatrixLayoutDestroy", g_api.matrixLayoutDestroy, missing);
    sym(lib, "cublasLtMatrixLayoutSetAttribute", g_api.matrixLayoutSetAttribute, missing);
    sym(lib, "cublasLtMatmulPreferenceCreate", g_api.preferenceCreate, missing);
    sym(lib, "cublasLtMatmulPreferenceDestroy", g_api.preferenceDestroy, missing);
    sym(lib, "cublasLtMatmulPreferenceSetAttribute", g_api.preferenceSetAttribute, missing);
    sym(lib, "cublasLtMatmulAlgoGetHeuristic", g_api.algoGetHeuristic, missing);
    sym(lib, "cublasLtMatmul", g_api.matmul, missing);
    if (!missing.empty()) {
      tried += std::string(tried.empty() ? "" : "; ") + n + " lacks " + missing;
      dlclose(lib);
      g_api = Api{};
      continue;
    }
    char buf[4096];
    g_path = n;
    // the resolved file, for the healthcheck
    if (name.find('/') == std::string::npos && dlinfo(lib, RTLD_DI_ORIGIN, buf) == 0) g_path = std::string(buf) + "/" + n;
    g_loaded = true;
    g_error.clear();
    return;
  }
  g_error = "cuBLASLt not found (" + tried + "); install the CUDA toolkit's libcublas or put libcublasLt.so.* on LD_LIBRARY_PATH";
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

const char* status_name(Status s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

void set_detail(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t_detail = buf;
}

const char* detail() { return t_detail.c_str(); }
void clear_detail() { t_detail.clear(); }

}  // namespace rmas::lt
