// What a fresh process allocates once, the first time a kernel runs a
// parallel_for on ExecuTorch's thread pool: cpuinfo's tables (and the files it
// reads), the pthreadpool with its threads. The sizing worker is a Python process in which
// ExecuTorch's extension may already have made part of it, so its own first
// run does not show all of it; a bare runner pays it on its first execute.
//
// Run with pte_lab's allocation counter preloaded; prints
// {"peak": bytes, "kept": bytes} above the heap held before the call, or
// {"error": "..."}.

#include <executorch/runtime/core/function_ref.h>
#include <executorch/runtime/platform/runtime.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

#include "pte_lab_counts.h"

// libexecutorch_threadpool.so's parallel_for, as the optimized kernels call it (the wheel ships no
// header for it)
namespace executorch::extension {
bool parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  executorch::runtime::FunctionRef<void(int64_t, int64_t)> f);
}  // namespace executorch::extension

int main() {
  executorch::runtime::runtime_init();  // a runner calls it before its data loader: not counted
  auto read = reinterpret_cast<void (*)(pte_lab_counts*)>(dlsym(RTLD_DEFAULT, "pte_lab_counter_read"));
  auto reset = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "pte_lab_counter_reset_peaks"));
  if (read == nullptr || reset == nullptr) {
    std::printf("{\"error\": \"the allocation counter is not preloaded\"}\n");
    return 1;
  }
  std::printf("%s", "");  // stdout's buffer, before counting
  std::fflush(stdout);
  pte_lab_counts before{}, after{};
  reset();
  read(&before);
  int64_t seen = 0;
  auto body = [&](int64_t b, int64_t e) { __atomic_add_fetch(&seen, e - b, __ATOMIC_RELAXED); };
  bool ok = executorch::extension::parallel_for(0, 4096, 1, body);
  read(&after);
  std::printf("{\"peak\": %lld, \"kept\": %lld, \"ran\": %d}\n",
              static_cast<long long>(after.heap_peak - before.heap_live),
              static_cast<long long>(after.heap_live - before.heap_live), ok && seen == 4096);
  return 0;
}
