// Run-time loading of a vendor library the build does not link (cuBLASLt, NCCL): the first candidate file that opens
// and holds every required symbol is used, once, on first use; the resolved path and, when none loads, why each
// candidate failed are kept for the health check and for error messages.
#pragma once

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

namespace rmas::dynlib {

/** Looks `name` up into `out`; a symbol not found is added to `missing` (nullptr: the symbol is optional). */
template <typename F>
void sym(void* lib, const char* name, F& out, std::string* missing) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out && missing) *missing += missing->empty() ? name : std::string(", ") + name;
}

/** One library's table of functions `Api`, its state and its one-time loading. */
template <typename Api>
class Library {
 public:
  Api fns{};
  /** Why no candidate loaded (set by the load function from `tried`), empty once one has. */
  std::string error;

  /**
   * Tries each candidate in turn; `bind(lib, missing)` looks the symbols up into `fns`. Returns whether one loaded;
   * `tried` collects why each one before it did not (dlopen's message, or the symbols it lacks).
   */
  template <typename Bind>
  bool open(const std::vector<std::string>& candidates, Bind bind, std::string& tried) {
    for (const std::string& name : candidates) {
      const char* n = name.c_str();
      void* lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        const char* e = dlerror();
        tried += std::string(tried.empty() ? "" : "; ") + (e ? e : n);
        continue;
      }
      std::string missing;
      bind(lib, missing);
      if (!missing.empty()) {
        tried += std::string(tried.empty() ? "" : "; ") + n + " lacks " + missing;
        dlclose(lib);
        fns = Api{};
        continue;
      }
      // the resolved file of a bare name, for the health check
      char dir[4096];
      path_ = n;
      if (name.find('/') == std::string::npos && dlinfo(lib, RTLD_DI_ORIGIN, dir) == 0) path_ = std::string(dir) + "/" + n;
      loaded_ = true;
      error.clear();
      return true;
    }
    return false;
  }

  /** The functions, loading with `load` on first use; nullptr when no candidate loaded. */
  const Api* get(void (*load)()) {
    std::call_once(once_, load);
    return loaded_ ? &fns : nullptr;
  }
  const char* path(void (*load)()) { return get(load) ? path_.c_str() : nullptr; }
  const char* why(void (*load)()) {
    get(load);
    return error.c_str();
  }

 private:
  bool loaded_ = false;
  std::string path_;
  std::once_flag once_;
};

}  // namespace rmas::dynlib
