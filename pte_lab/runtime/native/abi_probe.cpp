// pte_lab's ABI probe: the size and alignment of each ExecuTorch runtime object Method::init takes from the
// method allocator, as the compiler that includes this file lays them out (x86-64 LP64, Arm AAPCS ILP32...).
// Compiled (never linked, never run): pte_lab.runtime.abi_probe reads the two arrays below out of the object
// file. Types Method::init defines inside method.cpp or tensor_parser.h (not installed with the wheel) are
// given as structs of the same member types, in the same order.

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/freeable_buffer.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/merged_data_map.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/platform_memory_allocator.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <cstdint>
#include <optional>

namespace et = executorch::runtime;
using Tensor = executorch::aten::Tensor;

namespace {
// method.cpp's BackendDelegate: its segment, its backend, its handle
struct BackendDelegateLayout {
  et::FreeableBuffer segment;
  const et::BackendInterface* backend;
  et::DelegateHandle* handle;
};
// method.cpp's Chain: the flatbuffer chain, the argument lists, the kernels
struct ChainLayout {
  const void* s_chain;
  et::Span<et::InstructionArgs> argument_lists;
  et::OpFunction* kernels;
};
// tensor_parser.h's NamedData: a key and its buffer
struct NamedDataLayout {
  const char* key;
  et::FreeableBuffer buffer;
};
}  // namespace

#define PTE_LAB_ABI(X)                                                  \
  X(EValue, et::EValue)                                                 \
  X(EValuePointer, et::EValue*)                                         \
  X(Bool, bool)                                                         \
  X(Int64, int64_t)                                                     \
  X(Tensor, Tensor)                                                     \
  X(OptionalTensor, std::optional<Tensor>)                              \
  X(TensorImpl, executorch::aten::TensorImpl)                           \
  X(SizesType, executorch::aten::SizesType)                             \
  X(DimOrderType, executorch::aten::DimOrderType)                       \
  X(StridesType, executorch::aten::StridesType)                         \
  X(BoxedIntList, et::BoxedEvalueList<int64_t>)                         \
  X(BoxedTensorList, et::BoxedEvalueList<Tensor>)                       \
  X(BoxedOptionalTensorList, et::BoxedEvalueList<std::optional<Tensor>>) \
  X(BoolArrayRef, executorch::aten::ArrayRef<bool>)                     \
  X(DoubleArrayRef, executorch::aten::ArrayRef<double>)                 \
  X(CharArrayRef, executorch::aten::ArrayRef<char>)                     \
  X(NamedData, NamedDataLayout)                                         \
  X(MergedDataMap, et::internal::MergedDataMap)                         \
  X(BackendDelegate, BackendDelegateLayout)                             \
  X(CompileSpec, et::CompileSpec)                                       \
  X(Chain, ChainLayout)                                                 \
  X(OpFunction, et::OpFunction)                                         \
  X(InstructionArgs, et::InstructionArgs)                               \
  X(TensorMeta, et::TensorMeta)                                         \
  X(PlatformMemoryAllocator, et::internal::PlatformMemoryAllocator)

#define PTE_LAB_ENTRY(name, ...) static_cast<uint32_t>(sizeof(__VA_ARGS__)), static_cast<uint32_t>(alignof(__VA_ARGS__)),
#define PTE_LAB_NAME(name, ...) #name "\0"

// (sizeof, alignof) per type, in the order of the names
extern "C" __attribute__((used)) const uint32_t pte_lab_abi_layout[] = {PTE_LAB_ABI(PTE_LAB_ENTRY)};
// the types' names, each ended by a NUL
extern "C" __attribute__((used)) const char pte_lab_abi_names[] = PTE_LAB_ABI(PTE_LAB_NAME);
