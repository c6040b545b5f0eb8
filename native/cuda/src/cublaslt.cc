// Run-time loading of cuBLASLt (see cublaslt.h for why and for the checked declarations). RMAS_CUBLASLT=<path>
// picks a library file; the emulation build (native/cuda/emu) loads its CPU cuBLASLt from beside the addon.
#include "cublaslt.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "dynlib.h"

namespace rmas::lt {
namespace {

dynlib::Library<Api> g_lib;
thread_local std::string t_detail;

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
  Api& f = g_lib.fns;
  const bool ok = g_lib.open(candidates(), [&f](void* lib, std::string& missing) {
    dynlib::sym(lib, "cublasLtCreate", f.create, &missing);
    dynlib::sym(lib, "cublasLtDestroy", f.destroy, &missing);
    dynlib::sym(lib, "cublasLtGetVersion", f.getVersion, &missing);
    dynlib::sym(lib, "cublasLtMatmulDescCreate", f.matmulDescCreate, &missing);
    dynlib::sym(lib, "cublasLtMatmulDescDestroy", f.matmulDescDestroy, &missing);
    dynlib::sym(lib, "cublasLtMatmulDescSetAttribute", f.matmulDescSetAttribute, &missing);
    dynlib::sym(lib, "cublasLtMatrixLayoutCreate", f.matrixLayoutCreate, &missing);
    dynlib::sym(lib, "cublasLtMatrixLayoutDestroy", f.matrixLayoutDestroy, &missing);
    dynlib::sym(lib, "cublasLtMatrixLayoutSetAttribute", f.matrixLayoutSetAttribute, &missing);
    dynlib::sym(lib, "cublasLtMatmulPreferenceCreate", f.preferenceCreate, &missing);
    dynlib::sym(lib, "cublasLtMatmulPreferenceDestroy", f.preferenceDestroy, &missing);
    dynlib::sym(lib, "cublasLtMatmulPreferenceSetAttribute", f.preferenceSetAttribute, &missing);
    dynlib::sym(lib, "cublasLtMatmulAlgoGetHeuristic", f.algoGetHeuristic, &missing);
    dynlib::sym(lib, "cublasLtMatmul", f.matmul, &missing);
  }, tried);
  if (!ok)
    g_lib.error = "cuBLASLt not found (" + tried + "); install the CUDA toolkit's libcublas or put libcublasLt.so.* on LD_LIBRARY_PATH";
}

}  // namespace

const Api* api() { return g_lib.get(load); }

const char* loaded_path() { return g_lib.path(load); }

const char* load_error() { return g_lib.why(load); }

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
