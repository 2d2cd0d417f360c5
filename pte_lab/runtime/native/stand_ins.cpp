// pte_lab's stand-ins: a backend and kernels that bare-metal builds have and the executorch wheel lacks,
// registered under their real names, in the sizing worker only, so that ExecuTorch's own Program::load_method
// and Method::execute run as they do on the target (the delegate's compile specs, handles and kernel
// resolution from the method allocator, the temp allocator reset after every instruction) while each
// stand-in takes from ExecuTorch's allocators what the real one takes, per ExecuTorch's source. They compute
// nothing: a stand-in's outputs are not the real outputs.
//
// EthosUBackend, after backends/arm/runtime/EthosUBackend.cpp and VelaBinStream.cpp of ExecuTorch 1.2 to 1.5:
//   init     checks the Vela bin stream as vela_bin_validate and vela_bin_read do (the pointer and the end
//            16-byte aligned, the header and footer blocks, each block's name, the command stream's magic)
//            and allocates its ExecutionHandle with new: the heap, nothing from the method allocator
//            (platform_init on Cortex-M returns nullptr; before 1.2 the handle came from the method
//            allocator, allocateInstance<ExecutionHandle>);
//   execute  takes scratch_size bytes, 16-byte aligned, from the temp allocator (MemoryAllocationFailed when
//            it cannot), checks each input's type against Vela's element size, copies it into the scratch at
//            its offset and checks its element count, then copies each output out of the scratch.
//   Where the real backend would copy outside the scratch (a descriptor past its end), the stand-in refuses
//   (InvalidProgram) instead. External blocks (named data) are accepted without being resolved.
// cortex_m:: kernels (backends/cortex_m/ops): they take nothing from ExecuTorch's allocators (their scratch is
//   a planned tensor argument); the stand-in is a kernel that leaves its output as it is.

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

using executorch::aten::ScalarType;
using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Kernel;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Result;
using executorch::runtime::Span;

namespace {

constexpr size_t kBlockHeader = 32;
constexpr size_t kAlign = 16;
constexpr int kShapeDims = 6;

struct VelaIO {
  int32_t shape[kShapeDims];
  int32_t elem_size;
  int32_t offset;
  int32_t region;
};

// A block of descriptors as the stream holds it: a count, then the descriptors.
struct VelaIOs {
  int32_t count;
  VelaIO io[1];
};

// The real backend's handle, field for field: a platform-state pointer and VelaHandles (the command stream,
// the weights and the scratch with their sizes, the input and output descriptor blocks), allocated with new
// at init: nine pointer-sized words (72 bytes here, 36 on a 32-bit Cortex-M).
struct ExecutionHandle {
  void* platform_state;
  const char* cmd_data;
  size_t cmd_data_size;
  const char* weight_data;
  size_t weight_data_size;
  char* scratch_data;
  size_t scratch_data_size;
  const VelaIOs* inputs;
  const VelaIOs* outputs;
};
static_assert(sizeof(ExecutionHandle) == 9 * sizeof(void*), "EthosUBackend's ExecutionHandle is nine words");

int32_t count_of(const VelaIOs* ios) { return ios ? ios->count : 0; }

struct Stats {
  uint64_t inits, executes, refused, scratch_peak, handle_bytes;
} stats = {};

size_t padded(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool name_is(const char* block, const char* name) { return std::strncmp(block, name, std::strlen(name)) == 0; }

// vela_bin_validate and vela_bin_read, with every read inside the blob.
Error read_stream(const char* data, size_t size, ExecutionHandle* h) {
  if (size < kBlockHeader || reinterpret_cast<uintptr_t>(data) % kAlign ||
      (reinterpret_cast<uintptr_t>(data) + size - kBlockHeader) % kAlign ||
      !name_is(data, "vela_bin_stream") || !name_is(data + size - kBlockHeader, "vela_end_stream")) {
    return Error::InvalidProgram;
  }
  size_t pos = 0;
  while (pos < size) {
    if (pos + kBlockHeader > size) return Error::InvalidProgram;
    const char* name = data + pos;
    uint32_t bytes;
    std::memcpy(&bytes, data + pos + 16, 4);
    const bool external = static_cast<uint8_t>(data[pos + 20]) == 1;
    const char* payload = data + pos + kBlockHeader;
    if (pos + kBlockHeader + bytes > size) return Error::InvalidProgram;
    const size_t next = pos + kBlockHeader + padded(bytes);
    if (external && bytes != 64) return Error::InvalidProgram;
    if (name_is(name, "vela_bin_stream")) {
      if (pos != 0) return Error::InvalidProgram;
    } else if (name_is(name, "cmd_data")) {
      if (!external && (bytes < 4 || (std::strncmp(payload, "COP1", 4) && std::strncmp(payload, "COP2", 4)))) {
        return Error::InvalidProgram;
      }
      h->cmd_data = payload;
      h->cmd_data_size = bytes;
    } else if (name_is(name, "weight_data")) {
      h->weight_data = payload;
      h->weight_data_size = bytes;
    } else if (name_is(name, "scratch_size")) {
      if (external || bytes < 4) return Error::InvalidProgram;
      uint32_t scratch;
      std::memcpy(&scratch, payload, 4);
      h->scratch_data_size = scratch;
    } else if (name_is(name, "inputs") || name_is(name, "outputs")) {
      if (external || bytes < 4) return Error::InvalidProgram;
      int32_t count;
      std::memcpy(&count, payload, 4);
      if (count < 0 || static_cast<size_t>(count) > (bytes - 4) / sizeof(VelaIO)) return Error::InvalidProgram;
      const VelaIOs* ios = reinterpret_cast<const VelaIOs*>(payload);
      (name_is(name, "inputs") ? h->inputs : h->outputs) = ios;
    } else if (name_is(name, "vela_end_stream")) {
      return next == size ? Error::Ok : Error::InvalidProgram;
    } else {
      return Error::InvalidProgram;
    }
    pos = next;
  }
  return Error::InvalidProgram;
}

size_t io_count(const VelaIO& io) {
  size_t n = 1;
  for (int d = 0; d < kShapeDims; d++) n *= static_cast<size_t>(io.shape[d] < 0 ? 0 : io.shape[d]);
  return n;
}

bool io_type_ok(ScalarType t, int32_t elem_size) {
  return (t == ScalarType::Int && elem_size == 4) || (t == ScalarType::Char && elem_size == 1) ||
         (t == ScalarType::Byte && elem_size == 1) || (t == ScalarType::Short && elem_size == 2) ||
         (t == ScalarType::Bool && elem_size == 1);
}

class EthosUStandIn final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext&, FreeableBuffer* processed,
                               ArrayRef<CompileSpec>) const override {
    ExecutionHandle probe{};
    Error e = read_stream(static_cast<const char*>(processed->data()), processed->size(), &probe);
    if (e != Error::Ok) {
      stats.refused++;
      return e;
    }
    auto* h = new (std::nothrow) ExecutionHandle(probe);
    if (h == nullptr) return Error::MemoryAllocationFailed;
    stats.inits++;
    stats.handle_bytes = sizeof(ExecutionHandle);
    return h;
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override {
    auto* h = static_cast<ExecutionHandle*>(handle);
    char* scratch = static_cast<char*>(context.get_temp_allocator()->allocate(h->scratch_data_size, 16UL));
    if (scratch == nullptr) return Error::MemoryAllocationFailed;
    stats.executes++;
    if (h->scratch_data_size > stats.scratch_peak) stats.scratch_peak = h->scratch_data_size;
    const int input_count = count_of(h->inputs), output_count = count_of(h->outputs);
    if (args.size() < static_cast<size_t>(input_count + output_count)) return Error::InvalidProgram;
    for (int i = 0; i < input_count; i++) {
      if (!args[i]->isTensor()) return Error::InvalidProgram;
      auto t = args[i]->toTensor();
      const VelaIO& io = h->inputs->io[i];
      if (!io_type_ok(t.scalar_type(), io.elem_size)) return Error::InvalidProgram;
      if (io.offset < 0 || static_cast<size_t>(io.offset) + t.nbytes() > h->scratch_data_size) {
        return Error::InvalidProgram;  // the real backend would write past the scratch here
      }
      std::memcpy(scratch + io.offset, t.const_data_ptr<char>(), t.nbytes());
      if (static_cast<size_t>(t.numel()) != io_count(io)) return Error::InvalidProgram;
    }
    for (int i = 0; i < output_count; i++) {
      if (!args[input_count + i]->isTensor()) return Error::InvalidProgram;
      auto t = args[input_count + i]->toTensor();
      const VelaIO& io = h->outputs->io[i];
      const size_t vela_bytes = io_count(io) * static_cast<size_t>(io.elem_size < 0 ? 0 : io.elem_size);
      if (io.offset < 0 || static_cast<size_t>(io.offset) + vela_bytes > h->scratch_data_size) {
        return Error::InvalidProgram;  // the real backend would read past the scratch here
      }
      // what the NPU would have written is not computed: the output gets the scratch's bytes as they are
      std::memcpy(t.mutable_data_ptr<char>(), scratch + io.offset, t.nbytes() < vela_bytes ? t.nbytes() : vela_bytes);
    }
    return Error::Ok;
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<ExecutionHandle*>(handle); }
};

EthosUStandIn ethos_u_stand_in;
// The id's Python side is pte_lab.model.backends.ETHOS_U, whose StandIn names pte_lab_stand_in_ethos_u below.
Backend ethos_u_backend{"EthosUBackend", &ethos_u_stand_in};

void leave_output(KernelRuntimeContext&, Span<EValue*>) {}

}  // namespace

extern "C" {

// Registers the EthosUBackend stand-in; 0, or ExecuTorch's error code (InvalidArgument: a backend of that
// name is registered already).
int32_t pte_lab_stand_in_ethos_u() {
  return static_cast<int32_t>(executorch::runtime::register_backend(ethos_u_backend));
}

// Registers a kernel that leaves its output as it is under ``name`` (the caller checks the name is not
// registered: ExecuTorch aborts on a second registration). The name is kept for the process's life.
int32_t pte_lab_stand_in_kernel(const char* name) {
  char* kept = strdup(name);
  if (kept == nullptr) return static_cast<int32_t>(Error::MemoryAllocationFailed);
  return static_cast<int32_t>(executorch::runtime::register_kernel(Kernel(kept, leave_output)));
}

// What the EthosUBackend stand-in did: inits, executes, inits refused, the largest scratch it took from the
// temp allocator, and the bytes of the handle it allocated with new.
void pte_lab_stand_in_stats(uint64_t* out) {
  out[0] = stats.inits;
  out[1] = stats.executes;
  out[2] = stats.refused;
  out[3] = stats.scratch_peak;
  out[4] = stats.handle_bytes;
}

}  // extern "C"
