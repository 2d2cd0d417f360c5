// pte_lab's registry probe: which shared object of an ExecuTorch install
// registers which kernels and backends.
//
// Kernels and backends register themselves from static initializers when
// their library is loaded. The probe is linked to libexecutorch.so only; it
// prints what that registered, then loads each library named on the command
// line in turn (RTLD_NOW | RTLD_GLOBAL) and prints what each one added:
//
//   kernel <library> <operator>       (tab-separated)
//   backend <library> <backend> <available|unavailable>   (is_available(): a backend whose own runtime
//                                                          library is missing here says unavailable)
//   python <library>            (it loaded only after libpython: it links ExecuTorch's Python extension)
//   error <library> <dlerror>
//
// `--python PATH` names libpython, loaded (once) for a library that cannot be
// loaded without it.

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace {

std::set<std::string> seen_kernels;
size_t seen_backends = 0;

void report(const char* library) {
  for (const auto& k : executorch::runtime::get_registered_kernels()) {
    if (k.name_ != nullptr && seen_kernels.insert(k.name_).second) std::printf("kernel\t%s\t%s\n", library, k.name_);
  }
  size_t n = executorch::runtime::get_num_registered_backends();
  for (size_t i = seen_backends; i < n; i++) {
    auto name = executorch::runtime::get_backend_name(i);
    if (!name.ok()) continue;
    const auto* backend = executorch::runtime::get_backend_class(name.get());
    std::printf("backend\t%s\t%s\t%s\n", library, name.get(),
                backend != nullptr && backend->is_available() ? "available" : "unavailable");
  }
  seen_backends = n;
}

}  // namespace

int main(int argc, char** argv) {
  const char* python = nullptr;
  bool python_loaded = false;
  report("libexecutorch.so");
  for (int a = 1; a < argc; a++) {
    if (std::strcmp(argv[a], "--python") == 0 && a + 1 < argc) {
      python = argv[++a];
      continue;
    }
    void* h = dlopen(argv[a], RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr && python != nullptr && !python_loaded) {
      python_loaded = dlopen(python, RTLD_NOW | RTLD_GLOBAL) != nullptr;
      h = python_loaded ? dlopen(argv[a], RTLD_NOW | RTLD_GLOBAL) : nullptr;
      if (h != nullptr) std::printf("python\t%s\n", argv[a]);
    }
    if (h == nullptr) {
      const char* why = dlerror();
      std::printf("error\t%s\t%s\n", argv[a], why ? why : "dlopen failed");
      continue;
    }
    report(argv[a]);
  }
  std::fflush(stdout);
  return 0;
}
