// pte_lab's shape recorder: run one method once and record every value its
// instructions write, as ExecuTorch's ETDump logs them with a debug buffer
// (what-if learns each planned tensor's shape from them), without ExecuTorch's
// Python package.
//
// The runtime calls an EventTracer's log_evalue for each value an instruction
// writes while the tracer's debug level is kIntermediateOutputs: a kernel's
// returned value (the generated kernel wrappers log it), each argument of a
// delegate call (method.cpp logs them all, inputs and outputs alike, after the
// call), and a delegate's own intermediate outputs
// (log_intermediate_output_delegate). The tracer's debug handle is then the
// instruction's index. After the run the runtime logs the method's outputs as
// program outputs. ETDump (devtools/etdump) writes, per logged value, the debug
// handle and the value: a Tensor (its sizes; its bytes copied into the debug
// buffer, 64-byte aligned, the run aborted when they do not fit), a TensorList
// (each tensor), an Int, a Double or a Bool (no sizes); any other value aborts
// the process. A program output that is a Tensor or TensorList is marked as one
// (pte_lab leaves those out); an Int, Double or Bool one is not marked, and is
// logged under the handle the runtime holds after the last instruction (0).
//
// This recorder keeps the same sequence: (instruction, sizes) per tensor,
// (instruction, no sizes) per Int, Double or Bool, the tensors' bytes copied
// into a buffer of the size asked; where ETDump would abort (a value of another
// kind, a buffer too small), the run fails with an error instead.
//
// The method is loaded as ExecuTorch's Module loads it: the program mapped
// (MmapDataLoader), the planned arenas allocated whole at their planned sizes
// (zeroed), malloc'd method and temp allocators; an unplanned output gets a
// buffer of its planned size. Each input is what the caller gives: a tensor
// (contiguous, its bytes) or an Int, Double or Bool.

#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/tag.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

using executorch::aten::DimOrderType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::extension::FlatTensorDataMap;
using executorch::extension::MallocMemoryAllocator;
using executorch::extension::MmapDataLoader;
using executorch::runtime::AllocatorID;
using executorch::runtime::ArrayRef;
using executorch::runtime::ChainID;
using executorch::runtime::DebugHandle;
using executorch::runtime::DelegateDebugIntId;
using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::EventTracer;
using executorch::runtime::EventTracerDebugLogLevel;
using executorch::runtime::EventTracerEntry;
using executorch::runtime::EventTracerFilterBase;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::kUnsetDelegateDebugIntId;
using executorch::runtime::LoggedEValueType;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::Tag;

extern "C" {

// One logged value: the instruction (the tracer's debug handle when it was
// logged) and the tensor's sizes; dim -1: a value that is not a tensor.
struct PteLabLogged {
  uint32_t instruction;
  int32_t dim;
  int64_t sizes[16];
};

// One input as the caller gives it: kind 0 a tensor (scalar_type, sizes, its
// contiguous bytes), 1 an Int, 2 a Double, 3 a Bool.
struct PteLabShapeInput {
  int32_t kind;
  int32_t scalar_type;
  int32_t dim;
  int32_t reserved;
  int64_t sizes[16];
  const void* data;
  uint64_t nbytes;
  int64_t int_value;
  double double_value;
};

}  // extern "C"

namespace {

// What the run failed at (0: nothing), as pte_lab_shapes_step reports it.
enum Step : int32_t {
  kOk = 0,
  kLoadProgram = 1,
  kLoadMethod = 2,
  kSetInput = 3,
  kExecute = 4,
  kLogUnsupported = 5,  // a value ETDump cannot log (it aborts): its tag in `detail`
  kLogOutOfSpace = 6,   // the tensors' bytes outgrew the buffer (ETDump aborts)
  kPrepare = 7,
};

class ShapeTracer final : public EventTracer {
 public:
  explicit ShapeTracer(size_t buffer_bytes) : buffer_(buffer_bytes) {
    set_event_tracer_debug_level(EventTracerDebugLogLevel::kIntermediateOutputs);
  }

  std::vector<PteLabLogged> logged;
  int32_t failed = kOk;
  int64_t detail = 0;

  void create_event_block(const char*) override {}
  EventTracerEntry start_profiling(const char*, ChainID, DebugHandle) override { return EventTracerEntry{}; }
  EventTracerEntry start_profiling_delegate(const char*, DelegateDebugIntId) override { return EventTracerEntry{}; }
  void end_profiling_delegate(EventTracerEntry, const void*, size_t) override {}
  void log_profiling_delegate(const char*, DelegateDebugIntId, et_timestamp_t,
                              et_timestamp_t, const void*, size_t) override {}
  void end_profiling(EventTracerEntry) override {}
  void track_allocation(AllocatorID, size_t) override {}
  AllocatorID track_allocator(const char*) override { return 0; }
  void set_delegation_intermediate_output_filter(EventTracerFilterBase*) override {}

  Result<bool> log_evalue(const EValue& evalue, LoggedEValueType type) override {
    const bool output = type == LoggedEValueType::kProgramOutput;
    switch (evalue.tag) {
      case Tag::Tensor:
        if (!output) tensor(evalue.toTensor());
        break;
      case Tag::ListTensor:
        if (!output) {
          for (const Tensor& t : evalue.toTensorList()) tensor(t);
        }
        break;
      case Tag::Int:
      case Tag::Double:
      case Tag::Bool:
        scalar();
        break;
      default:
        fail(kLogUnsupported, static_cast<int64_t>(evalue.tag));
        break;
    }
    return true;
  }

  Result<bool> log_intermediate_output_delegate(const char* name, DelegateDebugIntId index,
                                                const Tensor& output) override {
    if (!named(name, index)) return Error::InvalidArgument;
    tensor(output);
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char* name, DelegateDebugIntId index,
                                                const ArrayRef<Tensor> output) override {
    if (!named(name, index)) return Error::InvalidArgument;
    for (const Tensor& t : output) tensor(t);
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char* name, DelegateDebugIntId index,
                                                const int&) override {
    if (!named(name, index)) return Error::InvalidArgument;
    scalar();
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char* name, DelegateDebugIntId index,
                                                const bool&) override {
    if (!named(name, index)) return Error::InvalidArgument;
    scalar();
    return true;
  }
  Result<bool> log_intermediate_output_delegate(const char* name, DelegateDebugIntId index,
                                                const double&) override {
    if (!named(name, index)) return Error::InvalidArgument;
    scalar();
    return true;
  }

 private:
  static constexpr size_t kAlignment = 64;  // ETDump's debug buffer aligns each tensor's bytes so
  std::vector<uint8_t> buffer_;
  size_t used_ = 0;

  // ETDump logs a delegate's value only when exactly one of name and index is given
  static bool named(const char* name, DelegateDebugIntId index) {
    return (name == nullptr) != (index == kUnsetDelegateDebugIntId);
  }
  void fail(int32_t why, int64_t what) {
    if (failed == kOk) {
      failed = why;
      detail = what;
    }
  }
  void scalar() {
    PteLabLogged rec{};
    rec.instruction = debug_handle_;
    rec.dim = -1;
    logged.push_back(rec);
  }
  void tensor(const Tensor& t) {
    PteLabLogged rec{};
    rec.instruction = debug_handle_;
    const auto sizes = t.sizes();
    if (sizes.size() > 16) {
      fail(kLogUnsupported, static_cast<int64_t>(Tag::Tensor));
      return;
    }
    rec.dim = static_cast<int32_t>(sizes.size());
    for (size_t d = 0; d < sizes.size(); d++) rec.sizes[d] = sizes[d];
    logged.push_back(rec);
    const size_t n = t.nbytes();
    if (n == 0 || t.const_data_ptr() == nullptr) return;
    const size_t at = (used_ + kAlignment - 1) / kAlignment * kAlignment;
    if (at + n > buffer_.size()) {
      fail(kLogOutOfSpace, static_cast<int64_t>(at + n));
      return;
    }
    std::memcpy(buffer_.data() + at, t.const_data_ptr(), n);
    used_ = at + n;
  }
};

struct Recording {
  std::optional<MmapDataLoader> loader, data_loader;
  std::optional<Program> program;
  std::optional<FlatTensorDataMap> data_map;
  MallocMemoryAllocator method_allocator, temp_allocator;
  std::vector<std::vector<uint8_t>> host_arenas;
  std::vector<DeviceMemoryBuffer> device_arenas;
  std::vector<Span<uint8_t>> spans;
  std::unique_ptr<HierarchicalAllocator> planned;
  std::unique_ptr<MemoryManager> manager;
  std::unique_ptr<ShapeTracer> tracer;
  // the inputs' tensors (the caller's bytes copied) and the unplanned outputs' buffers: they outlive the method
  std::vector<std::vector<SizesType>> sizes;
  std::vector<std::vector<DimOrderType>> dim_order;
  std::vector<std::vector<StridesType>> strides;
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::unique_ptr<TensorImpl>> impls;
  std::vector<std::vector<uint8_t>> outputs;
  std::optional<Method> method;

  int32_t step = kOk, error = 0;
  int64_t detail = 0;

  int32_t fail(int32_t at, Error e, int64_t what = 0) {
    step = at;
    error = static_cast<int32_t>(e);
    detail = what;
    return at;
  }

  int32_t run(const char* path, const char* data_path, const char* name, const PteLabShapeInput* inputs,
              uint64_t n_inputs, uint64_t buffer_bytes) {
    auto l = MmapDataLoader::from(path, MmapDataLoader::MlockConfig::UseMlockIgnoreErrors);
    if (!l.ok()) return fail(kLoadProgram, l.error());
    loader.emplace(std::move(l.get()));
    auto p = Program::load(&*loader, Program::Verification::InternalConsistency);
    if (!p.ok()) return fail(kLoadProgram, p.error());
    program.emplace(std::move(p.get()));
    if (data_path != nullptr && data_path[0] != '\0') {
      auto dl = MmapDataLoader::from(data_path, MmapDataLoader::MlockConfig::UseMlockIgnoreErrors);
      if (!dl.ok()) return fail(kLoadProgram, dl.error());
      data_loader.emplace(std::move(dl.get()));
      auto map = FlatTensorDataMap::load(&*data_loader);
      if (!map.ok()) return fail(kLoadProgram, map.error());
      data_map.emplace(std::move(map.get()));
    }
    auto meta = program->method_meta(name);
    if (!meta.ok()) return fail(kLoadMethod, meta.error());
    const size_t n = meta->num_memory_planned_buffers();
    host_arenas.reserve(n);
    for (size_t i = 0; i < n; i++) {
      auto size = meta->memory_planned_buffer_size(i);
      if (!size.ok()) return fail(kPrepare, size.error());
      auto dev = meta->memory_planned_buffer_device(i);
      if (!dev.ok()) return fail(kPrepare, dev.error());
      if (dev->type() != executorch::runtime::etensor::DeviceType::CPU) {
        auto buf = DeviceMemoryBuffer::create(size.get(), dev->type(), dev->index());
        if (!buf.ok()) return fail(kPrepare, buf.error());
        spans.emplace_back(static_cast<uint8_t*>(buf->data()), size.get());
        device_arenas.push_back(std::move(buf.get()));
      } else {
        host_arenas.emplace_back(size.get());
        spans.emplace_back(host_arenas.back().data(), size.get());
      }
    }
    planned = std::make_unique<HierarchicalAllocator>(Span<Span<uint8_t>>(spans.data(), spans.size()));
    manager = std::make_unique<MemoryManager>(&method_allocator, planned.get(), &temp_allocator);
    tracer = std::make_unique<ShapeTracer>(static_cast<size_t>(buffer_bytes));
    auto m = program->load_method(name, manager.get(), tracer.get(), data_map ? &*data_map : nullptr);
    if (!m.ok()) return fail(kLoadMethod, m.error());
    method.emplace(std::move(m.get()));
    if (int32_t rc = set_inputs(inputs, n_inputs); rc != kOk) return rc;
    if (int32_t rc = give_outputs(); rc != kOk) return rc;
    Error e = method->execute();
    if (tracer->failed != kOk) return fail(tracer->failed, Error::Ok, tracer->detail);
    if (e != Error::Ok) return fail(kExecute, e);
    return kOk;
  }

  int32_t set_inputs(const PteLabShapeInput* inputs, uint64_t n_inputs) {
    if (n_inputs != method->inputs_size()) return fail(kSetInput, Error::InvalidArgument, -1);
    sizes.resize(n_inputs);
    dim_order.resize(n_inputs);
    strides.resize(n_inputs);
    data.resize(n_inputs);
    impls.resize(n_inputs);
    for (size_t i = 0; i < n_inputs; i++) {
      const PteLabShapeInput& in = inputs[i];
      Error e = Error::Ok;
      switch (in.kind) {
        case 0: {
          if (in.dim < 0 || in.dim > 16) return fail(kSetInput, Error::InvalidArgument, static_cast<int64_t>(i));
          sizes[i].assign(in.sizes, in.sizes + in.dim);
          dim_order[i].resize(in.dim);
          for (int32_t d = 0; d < in.dim; d++) dim_order[i][d] = static_cast<DimOrderType>(d);
          strides[i].resize(in.dim);
          if (in.dim > 0) {
            e = executorch::runtime::dim_order_to_stride(sizes[i].data(), dim_order[i].data(), in.dim,
                                                          strides[i].data());
            if (e != Error::Ok) return fail(kSetInput, e, static_cast<int64_t>(i));
          }
          // the caller's bytes, in memory of our own (at least one byte: a tensor's data is never null)
          data[i].assign(static_cast<const uint8_t*>(in.data), static_cast<const uint8_t*>(in.data) + in.nbytes);
          if (data[i].empty()) data[i].push_back(0);
          impls[i] = std::make_unique<TensorImpl>(
              static_cast<executorch::aten::ScalarType>(in.scalar_type), static_cast<ssize_t>(in.dim),
              sizes[i].data(), data[i].data(), dim_order[i].data(), strides[i].data(),
              executorch::runtime::TensorShapeDynamism::STATIC);
          e = method->set_input(EValue(Tensor(impls[i].get())), i);
          break;
        }
        case 1:
          e = method->set_input(EValue(static_cast<int64_t>(in.int_value)), i);
          break;
        case 2:
          e = method->set_input(EValue(in.double_value), i);
          break;
        case 3:
          e = method->set_input(EValue(in.int_value != 0), i);
          break;
        default:
          e = Error::InvalidArgument;
      }
      if (e != Error::Ok) return fail(kSetInput, e, static_cast<int64_t>(i));
    }
    return kOk;
  }

  // An output the plan leaves to the caller (alloc_graph_output=False) gets a
  // buffer of its planned size, as ExecuTorch's Python module gives it.
  int32_t give_outputs() {
    const MethodMeta meta = method->method_meta();
    for (size_t i = 0; i < method->outputs_size(); i++) {
      auto tag = meta.output_tag(i);
      if (!tag.ok()) return fail(kSetInput, tag.error(), -1);
      if (tag.get() != Tag::Tensor) continue;
      auto tm = meta.output_tensor_meta(i);
      if (!tm.ok()) return fail(kSetInput, tm.error(), -1);
      if (tm->is_memory_planned()) continue;
      outputs.emplace_back(tm->nbytes() ? tm->nbytes() : 1);
      Error e = method->set_output_data_ptr(outputs.back().data(), tm->nbytes(), i);
      if (e != Error::Ok) return fail(kSetInput, e, -1);
    }
    return kOk;
  }
};

}  // namespace

extern "C" {

int32_t pte_lab_shapes_logged_size() { return sizeof(PteLabLogged); }
int32_t pte_lab_shapes_input_size() { return sizeof(PteLabShapeInput); }

// Loads the program at `path` (and its .ptd when data_path is not empty), runs
// `name` once on `inputs` with the recorder attached (its tensors' bytes in a
// buffer of `buffer_bytes`), and keeps what was logged. Never null: read the
// outcome with pte_lab_shapes_outcome, then free it with pte_lab_shapes_free.
void* pte_lab_shapes_record(const char* path, const char* data_path, const char* name,
                            const PteLabShapeInput* inputs, uint64_t n_inputs, uint64_t buffer_bytes) {
  auto* r = new Recording();
  r->run(path, data_path, name, inputs, n_inputs, buffer_bytes);
  return r;
}

// The step that failed (0: none; see Step), ExecuTorch's error code, and what
// it concerned (an input's index, a value's tag, the bytes the buffer needed).
int32_t pte_lab_shapes_outcome(void* h, int32_t* error, int64_t* detail) {
  auto* r = static_cast<Recording*>(h);
  *error = r->error;
  *detail = r->detail;
  return r->step;
}

uint64_t pte_lab_shapes_count(void* h) {
  auto* r = static_cast<Recording*>(h);
  return r->tracer ? r->tracer->logged.size() : 0;
}

// Copies the logged values [0, count) into `out` (pte_lab_shapes_count of them).
void pte_lab_shapes_read(void* h, PteLabLogged* out, uint64_t count) {
  auto* r = static_cast<Recording*>(h);
  if (!r->tracer) return;
  const size_t n = count < r->tracer->logged.size() ? count : r->tracer->logged.size();
  if (n) std::memcpy(out, r->tracer->logged.data(), n * sizeof(PteLabLogged));
}

void pte_lab_shapes_free(void* h) { delete static_cast<Recording*>(h); }

}  // extern "C"
