// The kernel registry: a name -> launch function map filled by static registrars (see registry.h).
#include "registry.h"

#include <map>
#include <string>

namespace rmas {
namespace {
// a function-local static, so registrars in any translation unit may run first
std::map<std::string, KernelFn>& table() {
  static std::map<std::string, KernelFn> t;
  return t;
}
}  // namespace

KernelRegistrar::KernelRegistrar(const char* name, KernelFn fn) { table()[name] = fn; }

KernelFn find_kernel(const char* name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

void list_kernels(void (*visit)(const char* name, void* user), void* user) {
  for (const auto& [name, fn] : table()) visit(name.c_str(), user);
}

}  // namespace rmas
