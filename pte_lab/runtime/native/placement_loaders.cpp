// The two loaders of Runtime.load_program, mirrored, and the steps run under one: see placement_loaders.h.

#include "glibc_compat.h"  // first: it binds the dl* calls below to old glibc versions

#include "placement_loaders.h"

#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include <dlfcn.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_device.h"
#include "device_ledger.h"

namespace pte_lab {

using executorch::aten::DimOrderType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::TensorImpl;
using executorch::extension::MallocMemoryAllocator;
using executorch::extension::MmapDataLoader;
using executorch::runtime::DeviceMemoryBuffer;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Span;
using executorch::runtime::Tag;
using executorch::runtime::etensor::Device;
using executorch::runtime::etensor::DeviceType;

std::string device_name(const Device& d) {
  if (d.type() == DeviceType::CPU) return "cpu";
  if (static_cast<int>(d.type()) == kCudaType) return "cuda:" + std::to_string(static_cast<int>(d.index()));
  return "device" + std::to_string(static_cast<int>(d.type())) + ":" + std::to_string(static_cast<int>(d.index()));
}

// --------------------------------------------------------------- reference
bool load_reference(const std::string& path, Reference* ref, std::string* why) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    *why = "cannot open the reference " + path;
    return false;
  }
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  char line[1024];
  std::string codes;
  double scale = 1;
  std::vector<uint64_t> sizes;
  bool header = false;
  while (std::fgets(line, sizeof line, f)) {
    char a[512], b[512];
    unsigned long long n = 0;
    unsigned long crc = 0;
    double s = 0;
    if (std::sscanf(line, "pte_lab.reference %511s", a) == 1) {
      header = std::strcmp(a, "1") == 0;
    } else if (std::sscanf(line, "codes %511s %lf", a, &s) == 2) {
      codes = dir + "/" + a;
      scale = s;
    } else if (std::sscanf(line, "input %511s %llu", a, &n) == 2) {
      if (std::strcmp(a, "float32") != 0) {
        *why = std::string("reference input dtype ") + a + " (only float32 inputs are supported)";
        std::fclose(f);
        return false;
      }
      sizes.push_back(n);
    } else if (std::sscanf(line, "expect %511s %llu %lu", b, &n, &crc) == 3) {
      ref->expect[b] = {n, static_cast<uint32_t>(crc)};
    }
  }
  std::fclose(f);
  if (!header) {
    *why = path + " is not a pte_lab.reference 1 file";
    return false;
  }
  FILE* c = std::fopen(codes.c_str(), "rb");
  if (c == nullptr) {
    *why = "cannot open the reference's input codes " + codes;
    return false;
  }
  for (uint64_t n : sizes) {
    std::vector<int8_t> raw(n / 4);
    if (std::fread(raw.data(), 1, raw.size(), c) != raw.size()) {
      std::fclose(c);
      *why = codes + " is shorter than its inputs";
      return false;
    }
    std::vector<float> v(raw.size());
    for (size_t i = 0; i < raw.size(); i++) v[i] = static_cast<float>(raw[i] * scale);
    ref->inputs.push_back(std::move(v));
  }
  std::fclose(c);
  return true;
}


namespace {
// CRC-32: // zlib's CRC-32 (reflected, polynomial 0xEDB88320): Python's zlib.crc32 gives the same value.
uint32_t crc32(const uint8_t* p, size_t n) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

}  // namespace

// ------------------------------------------------------------ measurement
namespace {
using HostBytes = int64_t (*)();
struct Mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
using Mallinfo2Fn = Mallinfo2 (*)();
}  // namespace

struct Meter::Impl {
  HostBytes counter = nullptr;
  Mallinfo2Fn mallinfo2 = nullptr;
  uint64_t seen = 0;
  int64_t outstanding = 0;  // device bytes allocated and not freed, from the ledger
};

Meter::Meter(std::string backend) : backend_(std::move(backend)), impl_(std::make_shared<Impl>()) {
  impl_->counter = reinterpret_cast<HostBytes>(dlsym(RTLD_DEFAULT, "pte_lab_counter_host_bytes"));
  impl_->mallinfo2 = reinterpret_cast<Mallinfo2Fn>(dlsym(RTLD_DEFAULT, "mallinfo2"));
}

std::string Meter::measured_by() const {
  return backend_ == "cuda" ? "cuda device ledger (exact: the bytes asked of cuMemAlloc / cuMemAllocManaged); "
                              "driver_device_bytes: cuMemGetInfo"
                            : "emulated device ledger (exact, host memory)";
}

std::string Meter::host_measured_by() const {
  return impl_->counter ? "exact (allocation counter)" : impl_->mallinfo2 ? "approximate (glibc mallinfo2)" : "none";
}

std::optional<int64_t> Meter::host() const {
  if (impl_->counter) return impl_->counter();
  if (impl_->mallinfo2) {
    Mallinfo2 m = impl_->mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  }
  return std::nullopt;
}

int64_t Meter::device() {
  uint64_t n = pte_lab_event_count();
  if (n > impl_->seen) {
    std::vector<PteLabEvent> ev(n - impl_->seen);
    uint64_t got = pte_lab_events(impl_->seen, ev.data(), ev.size());
    for (uint64_t i = 0; i < got; i++) {
      if (ev[i].device_type != kCudaType) continue;
      if (ev[i].kind == kAllocate) impl_->outstanding += static_cast<int64_t>(ev[i].bytes);
      if (ev[i].kind == kFree) impl_->outstanding -= static_cast<int64_t>(ev[i].bytes);
    }
    impl_->seen += got;
  }
  return impl_->outstanding;
}

uint64_t Meter::events() const { return pte_lab_event_count(); }

std::optional<int64_t> Meter::driver() const {
  if (backend_ != "cuda") return std::nullopt;
  uint64_t f = 0, t = 0;
  if (pte_lab_cuda_mem_info(&f, &t) != 0) return std::nullopt;
  return static_cast<int64_t>(t) - static_cast<int64_t>(f);
}

namespace {
// ---------------------------------------------------- the loaders, mirrored
// ProgramMemory of pybindings.cpp: a method allocator and a temp allocator on
// malloc, the planned arenas, and a MemoryManager over them. Device buffers are
// declared (so constructed) first, as the fix orders them: a device failure
// happens before any host arena is allocated and zero-filled.
struct ProgramMemory {
  std::vector<DeviceMemoryBuffer> device_buffers;
  std::vector<std::vector<uint8_t>> host_buffers;
  std::vector<Span<uint8_t>> spans;
  std::vector<Device> devices;
  MallocMemoryAllocator method_allocator;
  MallocMemoryAllocator temp_allocator;
  std::unique_ptr<HierarchicalAllocator> planned;
  std::unique_ptr<MemoryManager> manager;
};

struct LoadedMethod {
  std::shared_ptr<ProgramMemory> memory;
  std::unique_ptr<Method> method;
  std::vector<std::vector<uint8_t>> output_storages;  // non-planned outputs (pybindings keeps them too)
  bool outputs_ready = false;
};

}  // namespace

struct Runner::State {
  State(LoaderOptions o, Meter* meter, const std::vector<ArenaUsers>& users, const Reference* ref, LineWriter* out)
      : o_(std::move(o)), meter_(meter), users_(users), ref_(ref), out_(out) {}

  std::vector<StepRecord> steps;

  void run() {
    step("load_program", [&]() { return load_program(); });
    std::vector<std::string> names;
    if (program_) {
      for (size_t i = 0; i < program_->num_methods(); i++) names.push_back(program_->get_method_name(i).get());
    }
    for (auto& n : names) step("load_method " + n, [&]() { return load_method(n); });
    std::vector<std::string> device_methods, host_methods;
    for (auto& n : names) {
      if (!methods_.count(n)) continue;
      (has_device_buffers(n) ? device_methods : host_methods).push_back(n);
    }
    for (auto& n : device_methods) execute_step("execute " + n, n);
    for (auto& n : host_methods) execute_step("execute " + n, n);
    for (auto& n : device_methods) execute_step("execute " + n + " again", n);
    step("release", [&]() {
      methods_.clear();
      shared_.reset();
      program_.reset();
      loader_.reset();
      return std::string();
    });
  }

 private:
  template <typename F>
  StepRecord& step(const std::string& name, F&& fn) {
    StepRecord r;
    r.step = name;
    out_->begin(name);
    int64_t d0 = meter_->device();
    std::optional<int64_t> h0 = meter_->host(), v0 = meter_->driver();
    uint64_t e0 = meter_->events();
    auto t = std::chrono::steady_clock::now();
    r.error = fn();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    std::optional<int64_t> v1 = meter_->driver();
    uint64_t e1 = meter_->events();
    std::optional<int64_t> h1 = meter_->host();
    int64_t d1 = meter_->device();
    r.device_bytes = d1 - d0;
    if (h0 && h1) r.host_bytes = *h1 - *h0;
    r.device_events = static_cast<int64_t>(e1 - e0);
    if (v0 && v1) r.driver_device_bytes = *v1 - *v0;
    steps.push_back(r);
    if (name.rfind("execute ", 0) != 0) out_->step(r);  // execute steps stream once checked
    return steps.back();
  }

  void add_arena(const ArenaRecord& a) { out_->arena(a); }

  bool has_device_buffers(const std::string& name) {
    auto meta = program_->method_meta(name.c_str());
    if (!meta.ok()) return false;
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); i++) {
      auto d = meta->memory_planned_buffer_device(i);
      if (d.ok() && d->type() != DeviceType::CPU) return true;
    }
    return false;
  }

  const ArenaUsers* users_of(const std::string& method, int64_t mem_id) const {
    for (auto& u : users_) {
      if (u.method == method && u.mem_id == mem_id) return &u;
    }
    return nullptr;
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
  }

  // Which memory a device arena gets on CUDA, and why (from who touches it in the file).
  std::pair<int32_t, std::string> cuda_memory_for(const std::string& method, int64_t mem_id) const {
    if (o_.memory == "device") return {kCudaDeviceMemory, "forced by --memory device"};
    if (o_.memory == "managed") return {kCudaManagedMemory, "forced by --memory managed"};
    const ArenaUsers* u = users_of(method, mem_id);
    if (u == nullptr) return {kCudaManagedMemory, "its users could not be read from the file: managed, to be safe"};
    if (u->host_touches()) return {kCudaManagedMemory, "host code touches it: " + join(u->host_users)};
    return {kCudaDeviceMemory, "only device code touches it: " + join(u->device_users)};
  }

  std::string load_program() {
    auto loader = MmapDataLoader::from(o_.pte.c_str(), MmapDataLoader::MlockConfig::UseMlockIgnoreErrors);
    if (!loader.ok()) {
      return format("RuntimeError: Failed to create MmapDataLoader from file %s, error: 0x:%" PRIx32,
                    o_.pte.c_str(), static_cast<uint32_t>(loader.error()));
    }
    loader_ = std::make_unique<MmapDataLoader>(std::move(loader.get()));
    auto program = Program::load(loader_.get(), Program::Verification::InternalConsistency);
    if (!program.ok()) {
      return format("RuntimeError: Failed to load program, error: 0x:%" PRIx32, static_cast<uint32_t>(program.error()));
    }
    program_ = std::make_unique<Program>(std::move(program.get()));
    // per planned buffer index, the largest size over the methods that share (before: all of them;
    // after: the host-only ones)
    std::map<size_t, int64_t> sizes;
    std::string sharing;
    for (size_t m = 0; m < program_->num_methods(); m++) {
      const char* name = program_->get_method_name(m).get();
      if (o_.label == "after" && has_device_buffers(name)) continue;
      auto meta = program_->method_meta(name);
      if (!meta.ok()) return format("RuntimeError: Failed to get method meta for method %s", name);
      for (size_t j = 0; j < meta->num_memory_planned_buffers(); j++) {
        auto size = meta->memory_planned_buffer_size(j);
        if (!size.ok()) return format("RuntimeError: Failed to get planned buffer %zu of method %s", j, name);
        sizes[j] = std::max(sizes.count(j) ? sizes[j] : 0, size.get());
      }
      sharing += (sharing.empty() ? "" : ", ") + std::string(name);
    }
    shared_ = std::make_shared<ProgramMemory>();
    for (auto& [index, size] : sizes) shared_->host_buffers.emplace_back(static_cast<size_t>(size));
    for (auto& b : shared_->host_buffers) shared_->spans.emplace_back(b.data(), b.size());
    shared_->planned = std::make_unique<HierarchicalAllocator>(
        Span<Span<uint8_t>>(shared_->spans.data(), shared_->spans.size()));
    shared_->manager = std::make_unique<MemoryManager>(&shared_->method_allocator, shared_->planned.get(),
                                                       &shared_->temp_allocator);
    for (auto& [index, size] : sizes) {
      ArenaRecord a;
      a.when = "load_program";
      a.methods = sharing;
      a.runtime_index = static_cast<int64_t>(index);
      a.bytes = size;
      a.device = "cpu";
      a.memory = "host memory (std::vector<uint8_t>, shared by " + sharing + ")";
      if (o_.label == "before") note_tagged_on_device(index, size);
      add_arena(a);
    }
    return "";
  }

  // before: say which methods tagged this shared host arena for a device
  void note_tagged_on_device(size_t index, int64_t size) {
    for (size_t m = 0; m < program_->num_methods(); m++) {
      const char* name = program_->get_method_name(m).get();
      auto meta = program_->method_meta(name);
      if (!meta.ok() || index >= meta->num_memory_planned_buffers()) continue;
      auto d = meta->memory_planned_buffer_device(index);
      if (d.ok() && d->type() != DeviceType::CPU) {
        out_->note(format("before: %s's buffer %zu is tagged %s in the file; the pre-1.5 loader put it in the "
                               "shared host arena %zu (%" PRId64 " bytes)",
                               name, index, device_name(d.get()).c_str(), index, size));
      }
    }
  }

  std::string load_method(const std::string& name) {
    if (!program_) return "RuntimeError: no program";
    std::shared_ptr<ProgramMemory> memory = shared_;
    if (o_.label == "after" && has_device_buffers(name)) {
      auto meta = program_->method_meta(name.c_str());
      memory = std::make_shared<ProgramMemory>();
      size_t n = meta->num_memory_planned_buffers();
      std::vector<int64_t> sizes(n);
      for (size_t i = 0; i < n; i++) {
        sizes[i] = meta->memory_planned_buffer_size(i).get();
        memory->devices.push_back(meta->memory_planned_buffer_device(i).get());
      }
      // device buffers first
      std::vector<std::optional<size_t>> device_slot(n);
      for (size_t i = 0; i < n; i++) {
        const Device& d = memory->devices[i];
        if (d.type() == DeviceType::CPU) continue;
        ArenaRecord a;
        a.when = "load_method " + name;
        a.methods = name;
        a.runtime_index = static_cast<int64_t>(i);
        a.bytes = sizes[i];
        a.device = device_name(d);
        auto [kind, why] = cuda_memory_for(name, static_cast<int64_t>(i) + 1);
        if (const ArenaUsers* u = users_of(name, static_cast<int64_t>(i) + 1)) {
          a.touched_by = u->host_users;
          a.touched_by.insert(a.touched_by.end(), u->device_users.begin(), u->device_users.end());
        }
        if (meter_->backend() == "cuda" && static_cast<int>(d.type()) == kCudaType) {
          pte_lab_cuda_next_allocation(kind);
        }
        auto buf = DeviceMemoryBuffer::create(static_cast<size_t>(sizes[i]), d.type(), d.index());
        if (!buf.ok()) {
          std::string detail = meter_->backend() == "cuda" ? pte_lab_cuda_last_error() : "";
          return format("RuntimeError: Failed to allocate %" PRId64 " bytes for buffer %zu on device %d:%d",
                        sizes[i], i, static_cast<int>(d.type()), static_cast<int>(d.index())) +
                 (detail.empty() ? "" : " (" + detail + ")");
        }
        if (meter_->backend() == "cuda") {
          int32_t got = pte_lab_cuda_memory_of(buf->data());
          a.memory = got == kCudaDeviceMemory ? "device memory (cuMemAlloc)"
                     : got == kCudaManagedMemory
                         ? "managed memory (cuMemAllocManaged, prefetched to " + a.device + ")"
                         : "managed memory (cuMemAllocManaged, not prefetched: " +
                               std::string(pte_lab_cuda_last_error()) + ")";
          a.why = why;
        } else {
          a.memory = "host memory (the emulated device)";
          a.why = "on CUDA it would get " +
                  std::string(kind == kCudaDeviceMemory ? "device memory (cuMemAlloc)" : "managed memory") +
                  ": " + why;
        }
        add_arena(a);
        device_slot[i] = memory->device_buffers.size();
        memory->device_buffers.push_back(std::move(buf.get()));
      }
      for (size_t i = 0; i < n; i++) {
        if (device_slot[i]) {
          memory->host_buffers.emplace_back();
          continue;
        }
        memory->host_buffers.emplace_back(static_cast<size_t>(sizes[i]));
        ArenaRecord a;
        a.when = "load_method " + name;
        a.methods = name;
        a.runtime_index = static_cast<int64_t>(i);
        a.bytes = sizes[i];
        a.device = "cpu";
        a.memory = "host memory (std::vector<uint8_t>, private to " + name + ")";
        add_arena(a);
      }
      for (size_t i = 0; i < n; i++) {
        if (device_slot[i]) {
          auto& b = memory->device_buffers[*device_slot[i]];
          memory->spans.emplace_back(static_cast<uint8_t*>(b.data()), static_cast<size_t>(sizes[i]));
        } else {
          memory->spans.emplace_back(memory->host_buffers[i].data(), memory->host_buffers[i].size());
        }
      }
      memory->planned = std::make_unique<HierarchicalAllocator>(
          Span<Span<uint8_t>>(memory->spans.data(), memory->spans.size()),
          Span<const Device>(memory->devices.data(), memory->devices.size()));
      memory->manager = std::make_unique<MemoryManager>(&memory->method_allocator, memory->planned.get(),
                                                        &memory->temp_allocator);
    }
    auto method = program_->load_method(name.c_str(), memory->manager.get());
    if (!method.ok()) {
      return format("RuntimeError: Failed to load method %s, error: 0x:%" PRIx32, name.c_str(),
                    static_cast<uint32_t>(method.error()));
    }
    LoadedMethod lm;
    lm.memory = memory;
    lm.method = std::make_unique<Method>(std::move(method.get()));
    methods_[name] = std::move(lm);
    return "";
  }

  // Inputs for a method: the reference's (checked against the method's shapes), else zeros.
  struct Inputs {
    std::vector<std::vector<SizesType>> sizes;
    std::vector<std::vector<DimOrderType>> order;
    std::vector<std::vector<StridesType>> strides;
    std::vector<std::vector<uint8_t>> zeros;
    std::vector<std::unique_ptr<TensorImpl>> impls;
    std::string error;
  };

  void prepare_inputs(const std::string& name, Inputs* in) {
    Method& m = *methods_[name].method;
    const MethodMeta meta = m.method_meta();
    size_t n = m.inputs_size();
    in->sizes.resize(n);
    in->order.resize(n);
    in->strides.resize(n);
    for (size_t i = 0; i < n; i++) {
      auto tag = meta.input_tag(i);
      if (!tag.ok() || tag.get() != Tag::Tensor) {
        in->error = format("RuntimeError: input %zu of %s is not a tensor (only tensor inputs are supported)", i,
                           name.c_str());
        return;
      }
      auto tm = meta.input_tensor_meta(i);
      auto sizes = tm->sizes();
      auto order = tm->dim_order();
      in->sizes[i].assign(sizes.begin(), sizes.end());
      in->order[i].assign(order.begin(), order.end());
      in->strides[i].resize(sizes.size());
      if (!sizes.empty()) {
        Error e = executorch::runtime::dim_order_to_stride(in->sizes[i].data(), in->order[i].data(), sizes.size(),
                                                           in->strides[i].data());
        if (e != Error::Ok) {
          in->error = format("RuntimeError: input %zu of %s has an invalid dim order", i, name.c_str());
          return;
        }
      }
      void* data = nullptr;
      if (ref_ != nullptr) {
        if (i >= ref_->inputs.size() || ref_->inputs[i].size() * 4 != tm->nbytes() ||
            tm->scalar_type() != executorch::aten::ScalarType::Float) {
          in->error = format("RuntimeError: input %zu of %s (%zu bytes) does not match the reference's", i,
                             name.c_str(), tm->nbytes());
          return;
        }
        data = const_cast<float*>(ref_->inputs[i].data());
      } else {
        in->zeros.emplace_back(tm->nbytes() ? tm->nbytes() : 1, 0);
        data = in->zeros.back().data();
      }
      in->impls.push_back(std::make_unique<TensorImpl>(tm->scalar_type(), static_cast<ssize_t>(sizes.size()),
                                                       in->sizes[i].data(), data, in->order[i].data(),
                                                       in->strides[i].data(),
                                                       executorch::runtime::TensorShapeDynamism::STATIC));
    }
  }

  // PyMethod::__call__: set_inputs, execute (non-planned outputs get storage), outputs cloned to the caller.
  void execute_step(const std::string& label, const std::string& name) {
    Inputs in;
    prepare_inputs(name, &in);  // not measured: the caller's tensors exist before the call
    std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> clones;
    StepRecord& r = step(label, [&]() -> std::string {
      if (!in.error.empty()) return in.error;
      LoadedMethod& lm = methods_[name];
      Method& m = *lm.method;
      std::vector<EValue> values;
      for (auto& impl : in.impls) values.emplace_back(executorch::aten::Tensor(impl.get()));
      Error e = m.set_inputs(executorch::aten::ArrayRef<EValue>(values.data(), values.size()));
      if (e != Error::Ok) {
        return format("RuntimeError: method->set_inputs() for method '%s' failed with error 0x%" PRIx32, name.c_str(),
                      static_cast<uint32_t>(e));
      }
      const MethodMeta meta = m.method_meta();
      if (!lm.outputs_ready) {
        for (size_t i = 0; i < m.outputs_size(); i++) {
          auto tag = meta.output_tag(i);
          if (!tag.ok() || tag.get() != Tag::Tensor) {  // non-tensor outputs: an empty storage, ignored
            lm.output_storages.emplace_back();
            continue;
          }
          auto tm = meta.output_tensor_meta(i);
          if (!tm.ok() || tm->is_memory_planned()) {
            lm.output_storages.emplace_back();
          } else {
            lm.output_storages.emplace_back(tm->nbytes());
          }
        }
        lm.outputs_ready = true;
      }
      for (size_t i = 0; i < lm.output_storages.size(); i++) {
        if (lm.output_storages[i].empty()) continue;
        Error oe = m.set_output_data_ptr(lm.output_storages[i].data(), lm.output_storages[i].size(), i);
        if (oe != Error::Ok) return format("RuntimeError: set_output_data_ptr failed with error 0x%" PRIx32,
                                           static_cast<uint32_t>(oe));
      }
      e = m.execute();
      if (e != Error::Ok) {
        std::string detail = meter_->backend() == "cuda" ? pte_lab_cuda_last_error() : "";
        return format("RuntimeError: method->execute() failed with error 0x%" PRIx32, static_cast<uint32_t>(e)) +
               (detail.empty() ? "" : " (" + detail + ")");
      }
      std::vector<EValue> outs(m.outputs_size());
      e = m.get_outputs(outs.data(), outs.size());
      if (e != Error::Ok) {
        return format("RuntimeError: method->get_outputs() for method '%s' failed with error 0x%" PRIx32,
                      name.c_str(), static_cast<uint32_t>(e));
      }
      for (auto& v : outs) {  // clone_outputs=True: a host copy the caller owns
        if (!v.isTensor()) continue;
        const auto& t = v.toTensor();
        void* p = nullptr;
        if (posix_memalign(&p, 64, t.nbytes() ? t.nbytes() : 1) != 0) return "RuntimeError: out of host memory";
        std::memcpy(p, t.const_data_ptr(), t.nbytes());
        clones.emplace_back(static_cast<uint8_t*>(p), std::free);
        out_nbytes_ = t.nbytes();
      }
      return "";
    });
    if (r.error.empty() && ref_ != nullptr && !clones.empty()) {
      auto it = ref_->expect.find(name);
      if (it != ref_->expect.end()) {
        r.correct = out_nbytes_ == it->second.first && crc32(clones[0].get(), out_nbytes_) == it->second.second;
      }
    }
    out_->step(r);
  }

  const LoaderOptions o_;
  Meter* meter_;
  const std::vector<ArenaUsers>& users_;
  const Reference* ref_;
  LineWriter* out_;
  std::unique_ptr<MmapDataLoader> loader_;
  std::unique_ptr<Program> program_;
  std::shared_ptr<ProgramMemory> shared_;
  std::map<std::string, LoadedMethod> methods_;
  size_t out_nbytes_ = 0;
};


Runner::Runner(LoaderOptions o, Meter* meter, const std::vector<ArenaUsers>& users, const Reference* ref,
               LineWriter* out)
    : s_(std::make_unique<State>(std::move(o), meter, users, ref, out)) {}
Runner::~Runner() = default;
void Runner::run() { s_->run(); }

}  // namespace pte_lab
