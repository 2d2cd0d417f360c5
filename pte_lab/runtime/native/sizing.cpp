// pte_lab's sizing runner: load and run one method with pools a bare-metal
// build would give it, and measure what each pool really takes.
//
// A bare-metal ExecuTorch build hands Program::load_method a MemoryManager of
// three parts: a method allocator (Method::init's values, kernels, delegates'
// handles...), the planned arenas (HierarchicalAllocator, one span per
// non_const_buffer_sizes entry) and a temp allocator (kernel scratch, reset
// between instructions). This runner builds exactly that from ExecuTorch's
// own classes, in one of two modes:
//   - counting: method and temp pools are huge untouched reservations and
//     every allocation's high-water mark is recorded (peak, count, largest
//     alignment asked);
//   - exact: pools of given sizes, so a size can be shown sufficient (the
//     method loads and runs) and tight (one byte less is refused).
// The temp allocator may also be left out (many runners pass none): Method::init
// then resolves kernels in the method pool.
// Planned arenas are always allocated at their planned sizes; arenas planned
// for a device come from that device's registered allocator (a real one, or
// pte_lab's emulated device).
//
// Inputs are set before every execute, as an application does: the plan may
// give a planned input's bytes to later tensors once it is read (an XNNPACK
// program's int64 tokens, reused by its output), so a second execute without
// them would read the first one's results. Every tensor input is zeros at its
// planned (upper-bound) shape (token ids and positions of 0 are valid), or at
// a smaller shape the caller gives for a dynamic one
// (pte_lab_sizing_input_shape: ExecuTorch resizes the input to it at
// set_input, and kernels and delegates then run, and malloc, at that shape);
// other inputs get the value the program holds.
//
// The platform layer's allocator (et_pal_allocate: where a Method with no temp
// allocator takes its temp memory) is this host's (POSIX: malloc) or a
// bare-metal one's, which returns nullptr as Arm's does; either way the runner
// counts what was asked of it (pte_lab_sizing_platform).
//
// The program is loaded either the way Runtime.load_program does
// (MmapDataLoader, mlock errors ignored: the program is mapped, not in the
// heap) or the way a plain runner does (FileDataLoader of a given alignment:
// it mallocs what it reads, the program's flatbuffer at Program::load,
// constant segments, delegate blobs). The pools do not depend on the loader;
// the heap does. The runner shares the process's kernel, backend and
// device-allocator registries with ExecuTorch's Python extension.

#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/tag.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/platform.h>

#include "pte_lab_counts.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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
using executorch::aten::TensorImpl;
using executorch::extension::FileDataLoader;
using executorch::extension::FlatTensorDataMap;
using executorch::extension::MmapDataLoader;
using executorch::runtime::DataLoader;
using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Span;
using executorch::runtime::Tag;

namespace {

// Pools are aligned to a page, more than any allocation asks for, so that
// the padding a pool's allocations need is the same in both modes.
constexpr size_t kPoolAlignment = 4096;
// The counting reservation: MemoryAllocator sizes are 32-bit.
constexpr uint32_t kCountingReservation = 0xFFFFF000u;
// A pool size that asks for counting mode.
constexpr uint64_t kCounting = UINT64_MAX;
// A temp pool size that asks for no temp allocator at all.
constexpr uint64_t kNoPool = UINT64_MAX - 1;

// Memory the counter (when preloaded) must not see: the runner's own pools.
void* reserve(size_t bytes) {
  void* p = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  return (reinterpret_cast<intptr_t>(p) < 0 && reinterpret_cast<intptr_t>(p) > -4096) ? nullptr : p;
}
void unreserve(void* p, size_t bytes) {
  if (p != nullptr) syscall(SYS_munmap, p, bytes);
}

// The allocation counter's figures (alloc_counter.c, preloaded into the worker),
// read right around each step so that nothing else runs in between.
using Counts = pte_lab_counts;
using ReadCounts = void (*)(Counts*);
using ResetPeaks = void (*)();

struct StepCounts {
  Counts before{}, after{};
  int32_t counted = 0;
};

class CountedStep {
 public:
  explicit CountedStep(StepCounts* out) : out_(out) {
    static ReadCounts read = reinterpret_cast<ReadCounts>(dlsym(RTLD_DEFAULT, "pte_lab_counter_read"));
    static ResetPeaks reset = reinterpret_cast<ResetPeaks>(dlsym(RTLD_DEFAULT, "pte_lab_counter_reset_peaks"));
    read_ = read;
    out_->counted = read != nullptr && reset != nullptr;
    if (out_->counted) {
      reset();
      read_(&out_->before);
    }
  }
  ~CountedStep() {
    if (out_->counted) read_(&out_->after);
  }

 private:
  StepCounts* out_;
  ReadCounts read_ = nullptr;
};

// A MemoryAllocator that records its high-water mark across resets, and the
// same from the first execute on (what kernels and delegates take at run time,
// apart from what Method::init took): its peak, its allocations and how many
// of them found the cursor off their alignment (padding: bytes that depend on
// where the allocations before them ended).
class PeakAllocator final : public MemoryAllocator {
 public:
  PeakAllocator(uint32_t size, uint8_t* base) : MemoryAllocator(size, base) {}

  void* allocate(size_t size, size_t alignment = kDefaultAlignment) override {
    const uintptr_t cursor = reinterpret_cast<uintptr_t>(base_address()) + used_size();
    void* p = MemoryAllocator::allocate(size, alignment);
    if (p == nullptr) {
      failed_++;
      return nullptr;
    }
    calls_++;
    if (alignment > max_alignment_) max_alignment_ = alignment;
    if (used_size() > peak_) peak_ = used_size();
    if (in_run_) {
      run_calls_++;
      if (alignment != 0 && cursor % alignment != 0) run_padded_++;
      if (used_size() > run_peak_) run_peak_ = used_size();
    }
    return p;
  }

  uint64_t peak_ = 0, calls_ = 0, failed_ = 0, max_alignment_ = 0;
  bool in_run_ = false;
  uint64_t run_peak_ = 0, run_calls_ = 0, run_padded_ = 0;
};

struct Pool {
  size_t bytes = 0;
  void* base = nullptr;
  std::unique_ptr<PeakAllocator> allocator;

  // kCounting: a counting reservation; kNoPool: no pool at all; else a pool of exactly
  // `exact` bytes whose base is aligned to `alignment` and no more (so the alignment a
  // header states is the alignment that was proven).
  bool make(uint64_t exact, size_t alignment) {
    if (exact == kNoPool) return true;
    bool counting = exact == kCounting;
    size_t offset = (!counting && alignment < kPoolAlignment) ? alignment : 0;
    size_t want = counting ? kCountingReservation : static_cast<size_t>(exact) + offset;
    bytes = ((want + kPoolAlignment - 1) / kPoolAlignment + 1) * kPoolAlignment;
    base = reserve(bytes);
    if (base == nullptr) return false;
    allocator = std::make_unique<PeakAllocator>(counting ? kCountingReservation : static_cast<uint32_t>(exact),
                                                static_cast<uint8_t*>(base) + offset);
    return true;
  }
  void reset() {
    allocator.reset();
    unreserve(base, bytes);
    base = nullptr;
    bytes = 0;
  }
  ~Pool() { reset(); }
};

// One data loader: mapped (MmapDataLoader) or read into the heap (FileDataLoader).
struct Loader {
  std::optional<MmapDataLoader> mapped;
  std::optional<FileDataLoader> read;

  // file_alignment 0: MmapDataLoader; else FileDataLoader with that alignment
  Error open(const char* path, uint64_t file_alignment) {
    if (file_alignment == 0) {
      auto l = MmapDataLoader::from(path, MmapDataLoader::MlockConfig::UseMlockIgnoreErrors);
      if (!l.ok()) return l.error();
      mapped.emplace(std::move(l.get()));
    } else {
      auto l = FileDataLoader::from(path, static_cast<size_t>(file_alignment));
      if (!l.ok()) return l.error();
      read.emplace(std::move(l.get()));
    }
    return Error::Ok;
  }
  DataLoader* get() { return mapped ? static_cast<DataLoader*>(&*mapped) : static_cast<DataLoader*>(&*read); }
};

struct Sizing {
  Loader loader;
  std::optional<Program> program;
  // the program's external data (.ptd), when it has one
  Loader data_loader;
  std::optional<FlatTensorDataMap> data_map;
  // per method (one at a time)
  Pool method_pool, temp_pool;
  std::vector<void*> host_arenas;
  std::vector<size_t> host_arena_bytes;
  std::vector<DeviceMemoryBuffer> device_arenas;
  std::vector<Span<uint8_t>> spans;
  std::unique_ptr<HierarchicalAllocator> planned;
  std::unique_ptr<MemoryManager> manager;
  std::optional<Method> method;
  // inputs of the planned shapes
  std::vector<std::vector<SizesType>> in_sizes;
  std::vector<std::vector<DimOrderType>> in_dim_order;
  std::vector<std::vector<StridesType>> in_strides;
  std::vector<void*> in_data;  // per input: its buffer (nullptr: not a tensor)
  std::vector<size_t> in_bytes;
  std::vector<EValue> in_values;  // non-tensor inputs: the value the program holds
  std::vector<void*> out_data;    // unplanned outputs' buffers
  std::vector<std::unique_ptr<TensorImpl>> in_impls;
  // per input: the shape the caller asked for (empty: the planned shape)
  std::vector<std::vector<SizesType>> in_shape;
  bool inputs_made = false, inputs_set = false;
  // the allocation counter around the last step
  StepCounts last;

  void drop_method() {
    method.reset();
    manager.reset();
    planned.reset();
    spans.clear();
    device_arenas.clear();
    for (size_t i = 0; i < host_arenas.size(); i++) unreserve(host_arenas[i], host_arena_bytes[i]);
    host_arenas.clear();
    host_arena_bytes.clear();
    for (void* p : in_data) std::free(p);
    for (void* p : out_data) std::free(p);
    in_data.clear();
    in_bytes.clear();
    in_values.clear();
    out_data.clear();
    in_impls.clear();
    in_sizes.clear();
    in_dim_order.clear();
    in_strides.clear();
    in_shape.clear();
    inputs_made = inputs_set = false;
    method_pool.reset();
    temp_pool.reset();
  }
  ~Sizing() { drop_method(); }
};

int32_t code(Error e) { return static_cast<int32_t>(e); }

// The platform layer's allocator as the target has it: this host's (what was
// registered before pte_lab's), or a bare-metal one that refuses every request.
struct PlatformUse {
  uint64_t calls = 0, largest = 0, refused = 0;
};
PlatformUse g_platform;
bool g_bare_metal = false, g_platform_registered = false;
pal_allocate_method g_host_allocate = nullptr;
pal_free_method g_host_free = nullptr;

void* platform_allocate(size_t bytes) {
  g_platform.calls++;
  if (bytes > g_platform.largest) g_platform.largest = bytes;
  if (g_bare_metal) {
    g_platform.refused++;
    return nullptr;
  }
  return g_host_allocate != nullptr ? g_host_allocate(bytes) : std::malloc(bytes);
}
void platform_free(void* p) {
  if (p == nullptr) return;
  if (g_host_free != nullptr) {
    g_host_free(p);
  } else {
    std::free(p);
  }
}

int32_t open_program(Sizing* s, const char* path, const char* data_path, uint64_t file_alignment) {
  if (Error e = s->loader.open(path, file_alignment); e != Error::Ok) return code(e);
  auto program = Program::load(s->loader.get(), Program::Verification::InternalConsistency);
  if (!program.ok()) return code(program.error());
  s->program.emplace(std::move(program.get()));
  if (data_path != nullptr && data_path[0] != '\0') {
    if (Error e = s->data_loader.open(data_path, file_alignment); e != Error::Ok) return code(e);
    auto map = FlatTensorDataMap::load(s->data_loader.get());
    if (!map.ok()) return code(map.error());
    s->data_map.emplace(std::move(map.get()));
  }
  return 0;
}

}  // namespace

extern "C" {

struct PteLabPoolUse {
  uint64_t method_peak, method_calls, method_failed, method_max_alignment;
  uint64_t temp_peak, temp_calls, temp_failed, temp_max_alignment;
  // the temp allocator from the first execute on: peak, allocations, allocations that were padded
  uint64_t temp_run_peak, temp_run_calls, temp_run_padded;
};

// The platform layer's allocator from now on: bare_metal 0 this host's, else one
// that refuses every request (a bare-metal platform layer's et_pal_allocate);
// the counts start again. 0: done; -1: ExecuTorch refused the registration.
int32_t pte_lab_sizing_platform(int32_t bare_metal) {
  if (!g_platform_registered) {
    const executorch::runtime::PalImpl* host = executorch::runtime::get_pal_impl();
    g_host_allocate = host->allocate;
    g_host_free = host->free;
    executorch::runtime::PalImpl mine{};
    mine.allocate = platform_allocate;
    mine.free = platform_free;
    mine.source_filename = __FILE__;
    if (!executorch::runtime::register_pal(mine)) return -1;
    g_platform_registered = true;
  }
  g_bare_metal = bare_metal != 0;
  g_platform = PlatformUse{};
  return 0;
}

// What was asked of the platform layer's allocator since pte_lab_sizing_platform:
// calls, the largest request (bytes, with PlatformMemoryAllocator's node and
// alignment padding) and the calls refused.
void pte_lab_sizing_platform_use(uint64_t* calls, uint64_t* largest, uint64_t* refused) {
  *calls = g_platform.calls;
  *largest = g_platform.largest;
  *refused = g_platform.refused;
}

int32_t pte_lab_sizing_struct_size() { return sizeof(PteLabPoolUse); }

// What Method::init asks of the temp allocator per kernel argument to resolve
// an operator (else it falls back to the method allocator): a TensorMeta and
// a dim order of the largest rank.
uint64_t pte_lab_sizing_resolution_bytes_per_arg() {
  return sizeof(executorch::runtime::TensorMeta) + sizeof(DimOrderType) * executorch::runtime::kTensorDimensionLimit;
}

// FileDataLoader's default alignment (alignof(std::max_align_t)).
uint64_t pte_lab_sizing_file_loader_default_alignment() { return alignof(std::max_align_t); }

// Opens the program (and its .ptd when data_path is not empty) with an
// MmapDataLoader (file_alignment 0) or a FileDataLoader of that alignment;
// *error gets ExecuTorch's error code (0: ok). The loader's own allocations
// count in the load_program step.
void* pte_lab_sizing_open(const char* path, const char* data_path, uint64_t file_alignment, int32_t* error) {
  StepCounts counts;
  // the runner's own record is made before counting: load_program counts the loader and Program::load
  auto s = std::make_unique<Sizing>();
  {
    CountedStep step(&counts);
    *error = open_program(s.get(), path, data_path, file_alignment);
  }
  if (*error != 0) return nullptr;
  s->last = counts;
  return s.release();
}

int32_t pte_lab_sizing_last_step(void* h, Counts* before, Counts* after) {
  auto* s = static_cast<Sizing*>(h);
  *before = s->last.before;
  *after = s->last.after;
  return s->last.counted;
}

int32_t pte_lab_sizing_counts_size() { return sizeof(Counts); }

void pte_lab_sizing_close(void* h) { delete static_cast<Sizing*>(h); }


// Number of planned buffers ExecuTorch reads for the method (index 0 is mem_id 1),
// or -error.
int64_t pte_lab_sizing_planned_count(void* h, const char* name) {
  auto* s = static_cast<Sizing*>(h);
  auto meta = s->program->method_meta(name);
  if (!meta.ok()) return -code(meta.error());
  return static_cast<int64_t>(meta->num_memory_planned_buffers());
}

// Planned buffer i as ExecuTorch reads it: size (or -error), device type and index.
int64_t pte_lab_sizing_planned_buffer(void* h, const char* name, uint64_t i, int32_t* device_type,
                                      int32_t* device_index) {
  auto* s = static_cast<Sizing*>(h);
  auto meta = s->program->method_meta(name);
  if (!meta.ok()) return -code(meta.error());
  auto size = meta->memory_planned_buffer_size(i);
  if (!size.ok()) return -code(size.error());
  auto dev = meta->memory_planned_buffer_device(i);
  if (!dev.ok()) return -code(dev.error());
  *device_type = static_cast<int32_t>(dev->type());
  *device_index = static_cast<int32_t>(dev->index());
  return static_cast<int64_t>(size.get());
}

// Makes the pools and the planned arenas for the method (nothing of it is
// counted: the counter never sees the runner's own memory). A pool size of
// UINT64_MAX asks for counting mode, a temp pool of UINT64_MAX - 1 for no temp
// allocator; other sizes are exact, with the pool's base aligned to `alignment`
// (a power of two) and no more. Host arenas' bases are aligned to
// `planned_alignment` and no more (0: to a page).
int32_t pte_lab_sizing_prepare(void* h, const char* name, uint64_t method_pool, uint64_t temp_pool,
                               uint64_t alignment, uint64_t planned_alignment) {
  auto* s = static_cast<Sizing*>(h);
  s->drop_method();
  auto meta = s->program->method_meta(name);
  if (!meta.ok()) return code(meta.error());
  if (method_pool == kNoPool) return code(Error::InvalidArgument);
  for (uint64_t pool : {method_pool, temp_pool}) {
    if (pool != kCounting && pool != kNoPool && pool > kCountingReservation) return code(Error::InvalidArgument);
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return code(Error::InvalidArgument);
  if ((planned_alignment & (planned_alignment - 1)) != 0) return code(Error::InvalidArgument);
  size_t planned_offset = (planned_alignment != 0 && planned_alignment < kPoolAlignment) ? planned_alignment : 0;
  if (!s->method_pool.make(method_pool, alignment) || !s->temp_pool.make(temp_pool, alignment)) {
    return code(Error::MemoryAllocationFailed);
  }
  size_t n = meta->num_memory_planned_buffers();
  for (size_t i = 0; i < n; i++) {
    auto size = meta->memory_planned_buffer_size(i);
    if (!size.ok()) return code(size.error());
    auto dev = meta->memory_planned_buffer_device(i);
    if (!dev.ok()) return code(dev.error());
    size_t bytes = size.get();
    if (dev->type() != executorch::runtime::etensor::DeviceType::CPU) {
      auto buf = DeviceMemoryBuffer::create(bytes, dev->type(), dev->index());
      if (!buf.ok()) return code(buf.error());
      s->spans.emplace_back(static_cast<uint8_t*>(buf->data()), bytes);
      s->device_arenas.push_back(std::move(buf.get()));
    } else {
      size_t want = bytes + planned_offset;
      size_t reserved = want ? ((want + kPoolAlignment - 1) / kPoolAlignment) * kPoolAlignment : kPoolAlignment;
      void* p = reserve(reserved);
      if (p == nullptr) return code(Error::MemoryAllocationFailed);
      s->host_arenas.push_back(p);
      s->host_arena_bytes.push_back(reserved);
      s->spans.emplace_back(static_cast<uint8_t*>(p) + planned_offset, bytes);
    }
  }
  s->planned = std::make_unique<HierarchicalAllocator>(Span<Span<uint8_t>>(s->spans.data(), s->spans.size()));
  // no temp allocator (kNoPool): nullptr, as a runner that passes none
  s->manager = std::make_unique<MemoryManager>(s->method_pool.allocator.get(), s->planned.get(),
                                               s->temp_pool.allocator.get());
  return 0;
}

int32_t pte_lab_sizing_load_method(void* h, const char* name) {
  auto* s = static_cast<Sizing*>(h);
  if (!s->manager) return code(Error::InvalidState);
  CountedStep step(&s->last);
  auto method = s->program->load_method(name, s->manager.get(), nullptr, s->data_map ? &*s->data_map : nullptr);
  if (!method.ok()) return code(method.error());
  s->method.emplace(std::move(method.get()));
  return 0;
}

namespace {

// Makes the inputs once: zeroed buffers of the planned (upper-bound) shapes for
// tensors, or of the shape the caller gave (pte_lab_sizing_input_shape), the
// program's own value for the others; unplanned outputs
// (alloc_graph_output=False) get buffers of their planned sizes.
int32_t make_inputs(Sizing* s) {
  const MethodMeta meta = s->method->method_meta();
  size_t n = s->method->inputs_size();
  s->in_sizes.resize(n);
  s->in_dim_order.resize(n);
  s->in_strides.resize(n);
  s->in_data.assign(n, nullptr);
  s->in_bytes.assign(n, 0);
  s->in_values.assign(n, EValue());
  s->in_impls.resize(n);
  for (size_t i = 0; i < n; i++) {
    auto tag = meta.input_tag(i);
    if (!tag.ok()) return code(tag.error());
    if (tag.get() != Tag::Tensor) {
// MethodMeta does not carry a non-tensor input's value, and set_input
// accepts only the value the program holds: read it back (deprecated API).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      s->in_values[i] = s->method->get_input(i);
#pragma GCC diagnostic pop
      continue;
    }
    auto tm = meta.input_tensor_meta(i);
    if (!tm.ok()) return code(tm.error());
    auto sizes = tm->sizes();
    auto order = tm->dim_order();
    size_t nbytes = tm->nbytes();
    if (i < s->in_shape.size() && !s->in_shape[i].empty()) {
      // a shape of the caller's: of the planned rank; set_input refuses one beyond the bound
      if (s->in_shape[i].size() != sizes.size()) return code(Error::InvalidArgument);
      s->in_sizes[i] = s->in_shape[i];
      nbytes = executorch::runtime::elementSize(tm->scalar_type());
      for (SizesType d : s->in_sizes[i]) nbytes *= static_cast<size_t>(d);
    } else {
      s->in_sizes[i].assign(sizes.begin(), sizes.end());
    }
    s->in_dim_order[i].assign(order.begin(), order.end());
    s->in_strides[i].resize(sizes.size());
    if (!sizes.empty()) {
      Error e = executorch::runtime::dim_order_to_stride(s->in_sizes[i].data(), s->in_dim_order[i].data(),
                                                          sizes.size(), s->in_strides[i].data());
      if (e != Error::Ok) return code(e);
    }
    s->in_bytes[i] = nbytes;
    s->in_data[i] = std::calloc(nbytes ? nbytes : 1, 1);
    if (s->in_data[i] == nullptr) return code(Error::MemoryAllocationFailed);
    s->in_impls[i] = std::make_unique<TensorImpl>(
        tm->scalar_type(), static_cast<ssize_t>(sizes.size()), s->in_sizes[i].data(), s->in_data[i],
        s->in_dim_order[i].data(), s->in_strides[i].data(), executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND);
  }
  for (size_t i = 0; i < s->method->outputs_size(); i++) {
    auto tag = meta.output_tag(i);
    if (!tag.ok()) return code(tag.error());
    if (tag.get() != Tag::Tensor) continue;
    auto tm = meta.output_tensor_meta(i);
    if (!tm.ok()) return code(tm.error());
    if (tm->is_memory_planned()) continue;
    void* data = std::calloc(tm->nbytes() ? tm->nbytes() : 1, 1);
    if (data == nullptr) return code(Error::MemoryAllocationFailed);
    s->out_data.push_back(data);
    Error e = s->method->set_output_data_ptr(data, tm->nbytes(), i);
    if (e != Error::Ok) return code(e);
  }
  s->inputs_made = true;
  return 0;
}

}  // namespace

// Input i's shape for the runs to come, smaller than the planned one on a
// dynamic axis (dim sizes, of the planned rank; the buffer is made at this
// shape). After load_method, before the first pte_lab_sizing_set_inputs.
int32_t pte_lab_sizing_input_shape(void* h, uint64_t i, const int64_t* sizes, int32_t dim) {
  auto* s = static_cast<Sizing*>(h);
  if (!s->method || s->inputs_made) return code(Error::InvalidState);
  if (i >= s->method->inputs_size() || dim < 0 || dim > 16) return code(Error::InvalidArgument);
  for (int32_t d = 0; d < dim; d++) {
    if (sizes[d] < 0) return code(Error::InvalidArgument);
  }
  if (s->in_shape.size() <= i) s->in_shape.resize(i + 1);
  s->in_shape[i].assign(sizes, sizes + dim);
  return 0;
}

// Sets every input, as an application does before each execute: tensors are
// zeros at their planned (upper-bound) shapes, or the caller's (a planned input's bytes are
// copied into its arena; the plan may have given them to other tensors during
// the last execute), other inputs the value the program holds.
int32_t pte_lab_sizing_set_inputs(void* h) {
  auto* s = static_cast<Sizing*>(h);
  if (!s->method) return code(Error::InvalidState);
  if (!s->inputs_made) {
    int32_t rc = make_inputs(s);
    if (rc != 0) return rc;
  }
  for (size_t i = 0; i < s->in_data.size(); i++) {
    Error e;
    if (s->in_data[i] != nullptr) {
      std::memset(s->in_data[i], 0, s->in_bytes[i]);  // the caller's memory, for unplanned inputs
      e = s->method->set_input(EValue(executorch::aten::Tensor(s->in_impls[i].get())), i);
    } else {
      e = s->method->set_input(s->in_values[i], i);
    }
    if (e != Error::Ok) return code(e);
  }
  s->inputs_set = true;
  return 0;
}

// Executes the method once; inputs must have been set (pte_lab_sizing_set_inputs)
// since the last execute.
int32_t pte_lab_sizing_execute(void* h) {
  auto* s = static_cast<Sizing*>(h);
  if (!s->method || !s->inputs_set) return code(Error::InvalidState);
  s->inputs_set = false;
  if (auto* t = s->temp_pool.allocator.get()) t->in_run_ = true;
  CountedStep step(&s->last);
  return code(s->method->execute());
}

// One input or output as ExecuTorch's MethodMeta reads it (after load_method).
struct PteLabIO {
  char tag[24];
  int32_t tag_code;     // ExecuTorch's Tag
  int32_t scalar_type;  // -1: not a tensor
  int32_t dim;
  int32_t planned;
  int32_t has_value;  // a non-tensor input whose value is below
  uint64_t nbytes;
  int64_t sizes[16];
  int64_t dim_order[16];
  int64_t int_value;  // Int, Bool
  double double_value;
};

int32_t pte_lab_sizing_io_struct_size() { return sizeof(PteLabIO); }

int32_t pte_lab_sizing_io(void* h, int32_t output, uint64_t i, PteLabIO* out) {
  auto* s = static_cast<Sizing*>(h);
  if (!s->method) return code(Error::InvalidState);
  std::memset(out, 0, sizeof *out);
  out->scalar_type = -1;
  const MethodMeta meta = s->method->method_meta();
  auto tag = output ? meta.output_tag(i) : meta.input_tag(i);
  if (!tag.ok()) return code(tag.error());
  executorch::runtime::tag_to_string(tag.get(), out->tag, sizeof out->tag);
  out->tag_code = static_cast<int32_t>(tag.get());
  if (tag.get() == Tag::Tensor) {
    auto tm = output ? meta.output_tensor_meta(i) : meta.input_tensor_meta(i);
    if (!tm.ok()) return code(tm.error());
    if (tm->sizes().size() > 16) return code(Error::NotSupported);
    out->scalar_type = static_cast<int32_t>(tm->scalar_type());
    out->dim = static_cast<int32_t>(tm->sizes().size());
    out->planned = tm->is_memory_planned();
    out->nbytes = tm->nbytes();
    for (size_t d = 0; d < tm->sizes().size(); d++) {
      out->sizes[d] = tm->sizes()[d];
      out->dim_order[d] = tm->dim_order()[d];
    }
  } else if (!output) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    EValue v = s->method->get_input(i);
#pragma GCC diagnostic pop
    if (v.isInt()) {
      out->int_value = v.toInt();
      out->has_value = 1;
    } else if (v.isBool()) {
      out->int_value = v.toBool();
      out->has_value = 1;
    } else if (v.isDouble()) {
      out->double_value = v.toDouble();
      out->has_value = 1;
    }
  }
  return 0;
}

int32_t pte_lab_sizing_io_count(void* h, int32_t output) {
  auto* s = static_cast<Sizing*>(h);
  if (!s->method) return -code(Error::InvalidState);
  return static_cast<int32_t>(output ? s->method->outputs_size() : s->method->inputs_size());
}

void pte_lab_sizing_pools(void* h, PteLabPoolUse* out) {
  auto* s = static_cast<Sizing*>(h);
  std::memset(out, 0, sizeof *out);
  if (auto* m = s->method_pool.allocator.get()) {
    *out = PteLabPoolUse{m->peak_, m->calls_, m->failed_, m->max_alignment_, 0, 0, 0, 0, 0, 0, 0};
  }
  if (auto* t = s->temp_pool.allocator.get()) {
    out->temp_peak = t->peak_;
    out->temp_calls = t->calls_;
    out->temp_failed = t->failed_;
    out->temp_max_alignment = t->max_alignment_;
    out->temp_run_peak = t->run_peak_;
    out->temp_run_calls = t->run_calls_;
    out->temp_run_padded = t->run_padded_;
  }
}

}  // extern "C"
