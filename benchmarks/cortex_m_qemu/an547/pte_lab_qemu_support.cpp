// Linked into every runner by run_runner.sh (not part of pte_lab's output):
//  - et_pal_emit_log_message: the minimal PAL's is empty (ET_LOG prints nothing); this strong definition
//    prints every ET_LOG line (the library's and main.cpp's) through semihosting stdout.
//  - the hooks declared in pte_lab_qemu_hooks.h.
#include "pte_lab_qemu_hooks.h"

#include <executorch/runtime/platform/platform.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

using executorch::aten::ScalarType;
using executorch::runtime::EValue;

extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char* filename,
                                        const char* function, size_t line, const char* message,
                                        size_t length) {
  const char* base = std::strrchr(filename, '/');
  std::printf("[ET %c] %s:%u %.*s\n", static_cast<char>(level), base ? base + 1 : filename,
              static_cast<unsigned>(line), static_cast<int>(length), message);
  (void)function;
}

// the pattern (the same in compare_outputs.py): element i of input k
static float pattern_float(size_t i, int k) {
  return static_cast<float>(static_cast<int>((i * 37u + 11u * static_cast<unsigned>(k)) % 101u) - 50) / 50.0f;
}
static int64_t pattern_int(size_t i, int k) { return static_cast<int64_t>((i + static_cast<size_t>(k)) % 3u); }

void pte_lab_qemu_fill(executorch::runtime::etensor::TensorImpl& impl, int index) {
#ifdef PTE_LAB_QEMU_NONZERO
  void* d = impl.mutable_data();
  size_t n = static_cast<size_t>(impl.numel());
  switch (impl.scalar_type()) {
    case ScalarType::Float:
      for (size_t i = 0; i < n; i++) static_cast<float*>(d)[i] = pattern_float(i, index);
      break;
    case ScalarType::Long:
      for (size_t i = 0; i < n; i++) static_cast<int64_t*>(d)[i] = pattern_int(i, index);
      break;
    case ScalarType::Int:
      for (size_t i = 0; i < n; i++) static_cast<int32_t*>(d)[i] = static_cast<int32_t>(pattern_int(i, index));
      break;
    case ScalarType::Bool:
      for (size_t i = 0; i < n; i++) static_cast<bool*>(d)[i] = ((i + index) & 1) != 0;
      break;
    default:
      std::printf("[qemu] input %d: dtype %d left as zeros\n", index, static_cast<int>(impl.scalar_type()));
  }
#else
  (void)impl;
  (void)index;
#endif
}

void pte_lab_qemu_load_failed(const char* method_name, executorch::runtime::Error error) {
  std::printf("[qemu] load_method(\"%s\") failed: error 0x%x\n", method_name, static_cast<unsigned>(error));
}

void pte_lab_qemu_after_run(executorch::runtime::Method& method,
                            executorch::runtime::MemoryAllocator& method_allocator,
                            executorch::runtime::MemoryAllocator& temp_allocator) {
  std::printf("[qemu] method pool used %u of %u B; temp pool size %u B\n",
              static_cast<unsigned>(method_allocator.used_size()), static_cast<unsigned>(method_allocator.size()),
              static_cast<unsigned>(temp_allocator.size()));
  for (size_t o = 0; o < method.outputs_size(); o++) {
    const EValue& v = method.get_output(o);
    if (!v.isTensor()) {
      std::printf("[qemu] output %u: tag %d\n", static_cast<unsigned>(o), static_cast<int>(v.tag));
      continue;
    }
    const auto& t = v.toTensor();
    size_t n = static_cast<size_t>(t.numel());
    std::printf("[qemu] output %u: dtype %d numel %u\n", static_cast<unsigned>(o), static_cast<int>(t.scalar_type()),
                static_cast<unsigned>(n));
    if (t.scalar_type() != ScalarType::Float) continue;
    const float* p = t.const_data_ptr<float>();
    double sum = 0, asum = 0;
    for (size_t i = 0; i < n; i++) {
      sum += p[i];
      asum += p[i] < 0 ? -p[i] : p[i];
    }
    std::printf("[qemu] output %u: sum %.9g abssum %.9g\n", static_cast<unsigned>(o), sum, asum);
    size_t shown = n <= 4096 ? n : 64;
    for (size_t i = 0; i < shown; i++) {
      if (i % 8 == 0) std::printf("[qemu] out%u[%u]:", static_cast<unsigned>(o), static_cast<unsigned>(i));
      std::printf(" %.9g", static_cast<double>(p[i]));
      if (i % 8 == 7 || i + 1 == shown) std::printf("\n");
    }
  }
}
