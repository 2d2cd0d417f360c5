// Force-included (-include) into pte_lab's main.cpp by run_runner.sh. Declares the hooks that
// run_runner.sh's sed lines insert into main.cpp (see run_runner.sh, "patches"):
//   pte_lab_qemu_fill(impl, index)         before each set_input: fills the input with a fixed pattern
//                                          when built -DPTE_LAB_QEMU_NONZERO (else leaves the zeros)
//   pte_lab_qemu_load_failed(name, error)  where load_method fails: says so
//   pte_lab_qemu_after_run(method, m, t)   after the runner's two executes: prints the pools' use and the
//                                          outputs
#pragma once
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>
#include <executorch/runtime/executor/method.h>


void pte_lab_qemu_fill(::executorch::runtime::etensor::TensorImpl& impl, int index);
void pte_lab_qemu_load_failed(const char* method_name, ::executorch::runtime::Error error);
void pte_lab_qemu_after_run(::executorch::runtime::Method& method,
                            ::executorch::runtime::MemoryAllocator& method_allocator,
                            ::executorch::runtime::MemoryAllocator& temp_allocator);
