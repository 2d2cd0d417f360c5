// pte_lab_placement: the loader fix's before/after measurement as a standalone program (no Python).
//
// For a .pte it runs the steps of pte_lab's device-placement experiment
// (pte_lab/experiments/_placement_steps.py) under two loaders that mirror
// ExecuTorch's Python Runtime.load_program (extension/pybindings/pybindings.cpp,
// ProgramMemory and PyProgram):
//   before  executorch < 1.5: at load_program, one host arena per planned
//           buffer index, sized by the largest over every method, shared by
//           all methods; device-tagged buffers included (std::vector<uint8_t>).
//   after   executorch >= 1.5 (PR #22058): host-only methods share host arenas
//           sized over the host-only methods, at load_program; a method with a
//           device-tagged buffer gets private arenas at its load_method, device
//           ones first (DeviceMemoryBuffer, from the registered allocator).
// Each loader runs in a fresh process (this program started again with --one),
// so a native failure in one cannot take the other down.
//
// Device bytes come from the device ledger (device_ledger.h) that the
// allocator writes, and on CUDA also from the driver (cuMemGetInfo); host
// bytes from pte_lab's allocation counter when it is preloaded (run.sh does),
// glibc's statistics otherwise. The backend is chosen at run time: cuda where
// libcuda.so.1 opens and sees the device, else the emulated device.
//
// Output: the pte_lab.device_placement document (version 1), the one
// `pte-lab measure --json` writes, plus a table on stdout.

#include "glibc_compat.h"  // first: it binds the dl* calls below to old glibc versions

#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arena_users.h"
#include "cuda_device.h"
#include "device_ledger.h"

#ifndef PTE_LAB_EXECUTORCH_VERSION
#define PTE_LAB_EXECUTORCH_VERSION "unknown"
#endif

extern "C" int32_t pte_lab_register(int32_t type);  // the emulated device (emulated_device.cpp)
extern char** environ;

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

namespace {

const char* kProg = "pte_lab_placement";
constexpr int32_t kCudaType = 1;

std::string format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// ------------------------------------------------------------------ JSON out
std::string jstr(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += format("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}
std::string jint(int64_t v) { return std::to_string(v); }
std::string jopt(const std::optional<int64_t>& v) { return v ? jint(*v) : "null"; }

// -------------------------------------------------------------------- CRC-32
// zlib's CRC-32 (reflected, polynomial 0xEDB88320): Python's zlib.crc32 gives the same value.
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

// ----------------------------------------------------------------- options
struct Options {
  std::string pte, reference, published, json, loader = "both", backend = "auto", device = "cuda:0";
  std::string memory = "auto";  // CUDA device arenas: from who touches them in the file, or forced
  std::string one;  // internal: run one loader in this process and print RESULT <json>
  std::optional<int64_t> side;
  bool verbose = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "%s: error: %s\n", kProg, what.c_str());
  std::fprintf(stderr,
               "usage: %s --pte FILE [--reference FILE] [--published FILE] [--json OUT] [--side N]\n"
               "       [--loader both|before|after] [--backend auto|cuda|emulated] [--device cuda:N]\n"
               "       [--memory auto|managed|device] [--verbose]\n",
               kProg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--pte") o.pte = value();
    else if (a == "--reference") o.reference = value();
    else if (a == "--published") o.published = value();
    else if (a == "--json") o.json = value();
    else if (a == "--loader") o.loader = value();
    else if (a == "--backend") o.backend = value();
    else if (a == "--device") o.device = value();
    else if (a == "--memory") o.memory = value();
    else if (a == "--one") o.one = value();
    else if (a == "--side") o.side = std::strtoll(value().c_str(), nullptr, 10);
    else if (a == "--verbose") o.verbose = true;
    else if (a == "--help" || a == "-h") usage_error("help");
    else usage_error("unknown argument " + a);
  }
  if (o.pte.empty()) usage_error("--pte FILE is required");
  if (o.loader != "both" && o.loader != "before" && o.loader != "after") usage_error("--loader: both, before or after");
  if (o.backend != "auto" && o.backend != "cuda" && o.backend != "emulated") {
    usage_error("--backend: auto, cuda or emulated");
  }
  if (o.device.rfind("cuda:", 0) != 0 || o.device.size() < 6) usage_error("--device: cuda:N");
  if (o.memory != "auto" && o.memory != "managed" && o.memory != "device") usage_error("--memory: auto, managed or device");
  return o;
}

int device_index(const Options& o) { return std::atoi(o.device.c_str() + 5); }

// --------------------------------------------------------------- reference
// A text file (pte_lab.experiments.bundle writes it):
//   pte_lab.reference 1
//   codes FILE SCALE          int8 codes; input value = code * SCALE (every input, in order)
//   input DTYPE NBYTES        one line per input, in the method's input order
//   expect METHOD NBYTES CRC32  the method's first output, as eager PyTorch computed it
struct Reference {
  std::vector<std::vector<float>> inputs;
  std::map<std::string, std::pair<uint64_t, uint32_t>> expect;  // method -> (nbytes, crc32)
};

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

// ------------------------------------------------------------ measurement
using HostBytes = int64_t (*)();
struct Mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
using Mallinfo2Fn = Mallinfo2 (*)();

struct Meter {
  std::string backend;  // "cuda" or "emulated"
  HostBytes counter = nullptr;
  Mallinfo2Fn mallinfo2 = nullptr;
  uint64_t seen = 0;
  int64_t outstanding = 0;  // device bytes allocated and not freed, from the ledger

  Meter() {
    counter = reinterpret_cast<HostBytes>(dlsym(RTLD_DEFAULT, "pte_lab_counter_host_bytes"));
    mallinfo2 = reinterpret_cast<Mallinfo2Fn>(dlsym(RTLD_DEFAULT, "mallinfo2"));
  }
  std::string host_measured_by() const {
    return counter ? "exact (allocation counter)" : mallinfo2 ? "approximate (glibc mallinfo2)" : "none";
  }
  std::optional<int64_t> host() const {
    if (counter) return counter();
    if (mallinfo2) {
      Mallinfo2 m = mallinfo2();
      return static_cast<int64_t>(m.uordblks + m.hblkhd);
    }
    return std::nullopt;
  }
  int64_t device() {
    uint64_t n = pte_lab_event_count();
    if (n > seen) {
      std::vector<PteLabEvent> ev(n - seen);
      uint64_t got = pte_lab_events(seen, ev.data(), ev.size());
      for (uint64_t i = 0; i < got; i++) {
        if (ev[i].device_type != kCudaType) continue;
        if (ev[i].kind == kAllocate) outstanding += static_cast<int64_t>(ev[i].bytes);
        if (ev[i].kind == kFree) outstanding -= static_cast<int64_t>(ev[i].bytes);
      }
      seen += got;
    }
    return outstanding;
  }
  uint64_t events() const { return pte_lab_event_count(); }
  // device bytes in use as the driver sees them (total - free), CUDA only
  std::optional<int64_t> driver() const {
    if (backend != "cuda") return std::nullopt;
    uint64_t f = 0, t = 0;
    if (pte_lab_cuda_mem_info(&f, &t) != 0) return std::nullopt;
    return static_cast<int64_t>(t) - static_cast<int64_t>(f);
  }
};

struct StepRecord {
  std::string step, error;
  std::optional<bool> correct;
  double seconds = 0;
  std::optional<int64_t> device_bytes, host_bytes, device_events, driver_device_bytes;

  std::string json() const {
    return "{\"step\": " + jstr(step) + ", \"error\": " + (error.empty() ? "null" : jstr(error)) +
           ", \"correct\": " + (correct ? (*correct ? "true" : "false") : "null") +
           ", \"seconds\": " + format("%.6f", seconds) + ", \"device_bytes\": " + jopt(device_bytes) +
           ", \"host_bytes\": " + jopt(host_bytes) + ", \"device_events\": " + jopt(device_events) +
           ", \"driver_device_bytes\": " + jopt(driver_device_bytes) + "}";
  }
};

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

struct Arena {  // one arena a loader allocated, for the report
  std::string when, methods, device, memory, why;
  int64_t runtime_index = 0, bytes = 0;
  std::vector<std::string> touched_by;  // a device arena: who touches it, as the file says

  std::string json() const {
    return "{\"when\": " + jstr(when) + ", \"methods\": " + jstr(methods) + ", \"runtime_index\": " +
           jint(runtime_index) + ", \"mem_id\": " + jint(runtime_index + 1) + ", \"device\": " + jstr(device) +
           ", \"bytes\": " + jint(bytes) + ", \"memory\": " + jstr(memory) +
           ", \"why\": " + (why.empty() ? "null" : jstr(why)) + ", \"touched_by\": [" + list() + "]}";
  }

  std::string list() const {
    std::string s;
    for (auto& u : touched_by) s += (s.empty() ? "" : ", ") + jstr(u);
    return s;
  }
};

// A child streams what it measured as it goes (one line each, flushed), so that the parent keeps the
// steps done and names the step a crash happened in: STEP <json>, ARENA <json>, BEGIN <step>.
void stream(const char* kind, const std::string& text) {
  std::printf("%s %s\n", kind, text.c_str());
  std::fflush(stdout);
}

struct LoadedMethod {
  std::shared_ptr<ProgramMemory> memory;
  std::unique_ptr<Method> method;
  std::vector<std::vector<uint8_t>> output_storages;  // non-planned outputs (pybindings keeps them too)
  bool outputs_ready = false;
};

std::string device_name(const Device& d) {
  if (d.type() == DeviceType::CPU) return "cpu";
  if (static_cast<int>(d.type()) == kCudaType) return "cuda:" + std::to_string(static_cast<int>(d.index()));
  return "device" + std::to_string(static_cast<int>(d.type())) + ":" + std::to_string(static_cast<int>(d.index()));
}

class Runner {
 public:
  Runner(const Options& o, Meter* meter, const std::vector<pte_lab::ArenaUsers>& users, const Reference* ref)
      : o_(o), meter_(meter), users_(users), ref_(ref) {}

  std::vector<StepRecord> steps;
  std::vector<Arena> arenas;
  std::vector<std::string> notes;

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
  using Fn = std::string();

  template <typename F>
  StepRecord& step(const std::string& name, F&& fn) {
    StepRecord r;
    r.step = name;
    stream("BEGIN", name);
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
    if (name.rfind("execute ", 0) != 0) stream("STEP", r.json());  // execute steps stream once checked
    return steps.back();
  }

  void add_arena(const Arena& a) {
    arenas.push_back(a);
    stream("ARENA", a.json());
  }

  bool has_device_buffers(const std::string& name) {
    auto meta = program_->method_meta(name.c_str());
    if (!meta.ok()) return false;
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); i++) {
      auto d = meta->memory_planned_buffer_device(i);
      if (d.ok() && d->type() != DeviceType::CPU) return true;
    }
    return false;
  }

  const pte_lab::ArenaUsers* users_of(const std::string& method, int64_t mem_id) const {
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
    const pte_lab::ArenaUsers* u = users_of(method, mem_id);
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
      if (o_.one == "after" && has_device_buffers(name)) continue;
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
      Arena a;
      a.when = "load_program";
      a.methods = sharing;
      a.runtime_index = static_cast<int64_t>(index);
      a.bytes = size;
      a.device = "cpu";
      a.memory = "host memory (std::vector<uint8_t>, shared by " + sharing + ")";
      if (o_.one == "before") note_tagged_on_device(index, size);
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
        notes.push_back(format("before: %s's buffer %zu is tagged %s in the file; the pre-1.5 loader put it in the "
                               "shared host arena %zu (%" PRId64 " bytes)",
                               name, index, device_name(d.get()).c_str(), index, size));
      }
    }
  }

  std::string load_method(const std::string& name) {
    if (!program_) return "RuntimeError: no program";
    std::shared_ptr<ProgramMemory> memory = shared_;
    if (o_.one == "after" && has_device_buffers(name)) {
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
        Arena a;
        a.when = "load_method " + name;
        a.methods = name;
        a.runtime_index = static_cast<int64_t>(i);
        a.bytes = sizes[i];
        a.device = device_name(d);
        auto [kind, why] = cuda_memory_for(name, static_cast<int64_t>(i) + 1);
        if (const pte_lab::ArenaUsers* u = users_of(name, static_cast<int64_t>(i) + 1)) {
          a.touched_by = u->host_users;
          a.touched_by.insert(a.touched_by.end(), u->device_users.begin(), u->device_users.end());
        }
        if (meter_->backend == "cuda" && static_cast<int>(d.type()) == kCudaType) {
          pte_lab_cuda_next_allocation(kind);
        }
        auto buf = DeviceMemoryBuffer::create(static_cast<size_t>(sizes[i]), d.type(), d.index());
        if (!buf.ok()) {
          std::string detail = meter_->backend == "cuda" ? pte_lab_cuda_last_error() : "";
          return format("RuntimeError: Failed to allocate %" PRId64 " bytes for buffer %zu on device %d:%d",
                        sizes[i], i, static_cast<int>(d.type()), static_cast<int>(d.index())) +
                 (detail.empty() ? "" : " (" + detail + ")");
        }
        if (meter_->backend == "cuda") {
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
        Arena a;
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
        std::string detail = meter_->backend == "cuda" ? pte_lab_cuda_last_error() : "";
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
    stream("STEP", r.json());
  }

  const Options& o_;
  Meter* meter_;
  const std::vector<pte_lab::ArenaUsers>& users_;
  const Reference* ref_;
  std::unique_ptr<MmapDataLoader> loader_;
  std::unique_ptr<Program> program_;
  std::shared_ptr<ProgramMemory> shared_;
  std::map<std::string, LoadedMethod> methods_;
  size_t out_nbytes_ = 0;
};

// ------------------------------------------------------------- backends
struct Backend {
  std::string name;         // "cuda" or "emulated"
  std::string line;         // the one line that says which, and why
  std::string measured_by;  // how device bytes are measured
  PteLabCudaInfo info{};
};

const char* kEmulatedMeasuredBy = "emulated device ledger (exact, host memory)";
const char* kCudaMeasuredBy =
    "cuda device ledger (exact: the bytes asked of cuMemAlloc / cuMemAllocManaged); "
    "driver_device_bytes: cuMemGetInfo";
// What the driver's figure is, said wherever it is shown.
const char* kDriverFigure =
    "driver_device_bytes is the change in the device's used memory (total - free) that cuMemGetInfo reports, "
    "after synchronizing: it counts the whole device (every process and context on it), allocations rounded "
    "up to the driver's page granularity, and managed memory only while its pages are resident on the device "
    "(prefetched there at allocation; a host delegate touching them moves them back to the host)";

// What the host figure counts on CUDA, said with the driver's figure.
const char* kHostFigureCuda =
    "host_bytes counts every heap allocation and anonymous mapping of the process in the step, the CUDA "
    "driver's own included (its bookkeeping, and whatever it maps on the host for managed memory)";

std::string describe_cuda(const PteLabCudaInfo& i) {
  return format("%s (cuda:%d), compute capability %d.%d, %.1f GiB, driver API %d.%d; managed memory %s, "
                "concurrent managed access %s, pageable memory access %s",
                i.name, i.device_index, i.compute_major, i.compute_minor, i.total_bytes / 1073741824.0,
                i.driver_version / 1000, (i.driver_version % 1000) / 10, i.managed_memory ? "yes" : "no",
                i.concurrent_managed_access ? "yes" : "no", i.pageable_memory_access ? "yes" : "no");
}

// Chooses the backend without creating a CUDA context (the parent only probes).
Backend choose(const Options& o) {
  Backend b;
  char why[512] = {};
  if (o.backend != "emulated" && pte_lab_cuda_open(device_index(o), 1, why, sizeof why) == 0) {
    pte_lab_cuda_info(&b.info);
    b.name = "cuda";
    b.measured_by = kCudaMeasuredBy;
    b.line = "backend cuda: " + describe_cuda(b.info);
    return b;
  }
  if (o.backend == "cuda") {
    std::fprintf(stderr, "%s: error: --backend cuda: %s\n", kProg, why);
    std::exit(2);
  }
  b.name = "emulated";
  b.measured_by = kEmulatedMeasuredBy;
  b.line = o.backend == "emulated" ? "backend emulated (asked for): device memory is host memory, counted in the "
                                     "emulated device's ledger"
                                   : std::string("backend emulated: ") + why +
                                         "; device memory is host memory, counted in the emulated device's ledger";
  return b;
}

// ---------------------------------------------------------- one loader
std::string one_runtime(const Options& o) {
  executorch::runtime::runtime_init();
  Meter meter;
  meter.backend = o.backend;
  std::string failure;
  if (o.backend == "cuda") {
    char why[512] = {};
    if (pte_lab_cuda_open(device_index(o), 0, why, sizeof why) != 0) {
      failure = why;
    } else if (pte_lab_cuda_register() != 0) {
      failure = "another CUDA allocator is already registered in ExecuTorch's registry";
    }
  } else if (pte_lab_register(kCudaType) < 0) {
    failure = "another CUDA allocator is already registered in ExecuTorch's registry";
  }
  std::vector<pte_lab::ArenaUsers> users;
  std::vector<std::string> notes;
  std::vector<uint8_t> bytes;
  std::string why;
  if (!pte_lab::read_program_bytes(o.pte.c_str(), &bytes, &why) ||
      !pte_lab::read_arena_users(bytes.data(), bytes.size(), &users, &why)) {
    notes.push_back("who touches each device arena could not be read (" + why + "): CUDA arenas get managed memory");
  }
  std::vector<uint8_t>().swap(bytes);
  Reference ref;
  bool have_ref = false;
  if (!o.reference.empty()) {
    if (!load_reference(o.reference, &ref, &why)) {
      failure = why;
    } else {
      have_ref = true;
    }
  }
  Runner runner(o, &meter, users, have_ref ? &ref : nullptr);
  if (failure.empty()) runner.run();
  for (auto& n : runner.notes) notes.push_back(n);
  std::string label = o.one;
  std::string loader =
      label == "before" ? "Runtime.load_program of executorch < 1.5 (every planned arena from host memory, shared by "
                          "all methods, at load_program), mirrored in C++"
                        : "Runtime.load_program of executorch >= 1.5 (host-only methods share host arenas at "
                          "load_program; a device method's arenas are its own, at load_method, device first), "
                          "mirrored in C++";
  std::string s = "{\"label\": " + jstr(label) + ", \"python\": null, \"executorch_version\": " +
                  jstr(PTE_LAB_EXECUTORCH_VERSION) + ", \"measured_by\": " +
                  jstr(o.backend == "cuda" ? kCudaMeasuredBy : kEmulatedMeasuredBy) +
                  ", \"host_measured_by\": " + jstr(meter.host_measured_by()) + ", \"steps\": [";
  for (size_t i = 0; i < runner.steps.size(); i++) s += (i ? ", " : "") + runner.steps[i].json();
  s += "], \"failure\": " + (failure.empty() ? std::string("null") : jstr(failure)) +
       ", \"runner\": " + jstr(std::string(kProg) + " (native): " + loader) + ", \"backend\": " + jstr(o.backend) +
       ", \"arenas\": [";
  for (size_t i = 0; i < runner.arenas.size(); i++) s += (i ? ", " : "") + runner.arenas[i].json();
  s += "], \"notes\": [";
  for (size_t i = 0; i < notes.size(); i++) s += (i ? ", " : "") + jstr(notes[i]);
  return s + "]}";
}

// ------------------------------------------------------- both loaders
std::string self_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

std::string failure_json(const std::string& label, const Options& o, const std::string& failure,
                         const std::string& steps = "", const std::string& arenas = "") {
  return "{\"label\": " + jstr(label) + ", \"python\": null, \"executorch_version\": " +
         jstr(PTE_LAB_EXECUTORCH_VERSION) + ", \"measured_by\": null, \"host_measured_by\": null, \"steps\": [" +
         steps + "], \"failure\": " + jstr(failure) + ", \"runner\": " + jstr(std::string(kProg) + " (native)") +
         ", \"backend\": " + jstr(o.backend) + ", \"arenas\": [" + arenas + "], \"notes\": []}";
}

// The lines of a child's output that start with `kind `, without it.
std::vector<std::string> streamed(const std::string& out, const std::string& kind) {
  std::vector<std::string> v;
  size_t p = 0;
  while (p < out.size()) {
    size_t e = out.find('\n', p);
    std::string l = out.substr(p, e == std::string::npos ? std::string::npos : e - p);
    if (l.rfind(kind + " ", 0) == 0) v.push_back(l.substr(kind.size() + 1));
    if (e == std::string::npos) break;
    p = e + 1;
  }
  return v;
}

// Runs one loader in a fresh process; its RESULT line, or a failure saying how it ended.
std::string spawn_runtime(const Options& o, const std::string& label) {
  std::string exe = self_path();
  char out_path[] = "/tmp/pte_lab_placement_outXXXXXX";
  char err_path[] = "/tmp/pte_lab_placement_errXXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  if (exe.empty() || out_fd < 0 || err_fd < 0) return failure_json(label, o, "cannot start a process for it");
  std::vector<std::string> args = {exe,         "--pte",   o.pte,      "--one",    label,
                                   "--backend", o.backend, "--device", o.device, "--memory", o.memory};
  if (!o.reference.empty()) {
    args.push_back("--reference");
    args.push_back(o.reference);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_fd);
  close(err_fd);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  std::string out = read_file(out_path), err = read_file(err_path);
  unlink(out_path);
  unlink(err_path);
  if (o.verbose && !err.empty()) std::fprintf(stderr, "--- %s (%s) stderr ---\n%s", label.c_str(), o.backend.c_str(), err.c_str());
  if (rc != 0) return failure_json(label, o, std::string("cannot start ") + exe + ": " + std::strerror(rc));
  std::vector<std::string> result = streamed(out, "RESULT");
  if (!result.empty()) return result.back();
  std::string how = WIFSIGNALED(status) ? std::string("killed by ") + strsignal(WTERMSIG(status))
                                        : "exit " + std::to_string(WEXITSTATUS(status));
  // the step it died in, and the last lines it printed that are not ExecuTorch's information ("I ...")
  std::vector<std::string> begun = streamed(out, "BEGIN"), done = streamed(out, "STEP"), lines;
  size_t p = 0;
  while (p < err.size()) {
    size_t e = err.find('\n', p);
    std::string l = err.substr(p, e == std::string::npos ? std::string::npos : e - p);
    if (!l.empty() && l.rfind("I ", 0) != 0) lines.push_back(l);
    if (e == std::string::npos) break;
    p = e + 1;
  }
  std::string tail;
  for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); i++) {
    tail += (tail.empty() ? "" : " | ") + lines[i];
  }
  std::string where = begun.size() > done.size() ? " in step '" + begun.back() + "'" : "";
  std::string steps, arenas;
  for (auto& s : done) steps += (steps.empty() ? "" : ", ") + s;
  for (auto& a : streamed(out, "ARENA")) arenas += (arenas.empty() ? "" : ", ") + a;
  return failure_json(label, o, "process " + how + where + (tail.empty() ? "" : ": " + tail), steps, arenas);
}

int64_t planned_device_bytes(const Options& o) {
  auto loader = MmapDataLoader::from(o.pte.c_str(), MmapDataLoader::MlockConfig::UseMlockIgnoreErrors);
  if (!loader.ok()) return -1;
  auto program = Program::load(&loader.get(), Program::Verification::InternalConsistency);
  if (!program.ok()) return -1;
  int64_t total = 0;
  for (size_t m = 0; m < program->num_methods(); m++) {
    auto meta = program->method_meta(program->get_method_name(m).get());
    if (!meta.ok()) continue;
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); i++) {
      auto d = meta->memory_planned_buffer_device(i);
      if (d.ok() && device_name(d.get()) == o.device) total += meta->memory_planned_buffer_size(i).get();
    }
  }
  return total;
}

// A tiny reader of the runtimes' JSON for the table: the value after "key": in one step object.
std::string field(const std::string& obj, const std::string& key) {
  size_t at = obj.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  at += key.size() + 4;
  if (obj[at] == '"') {
    std::string v;
    for (size_t i = at + 1; i < obj.size() && obj[i] != '"'; i++) {
      if (obj[i] == '\\' && i + 1 < obj.size()) i++;
      v += obj[i];
    }
    return v;
  }
  size_t end = obj.find_first_of(",}", at);
  return obj.substr(at, end - at);
}

// The position of the '}' closing the flat object that starts at `at` (strings may hold braces).
size_t object_end(const std::string& s, size_t at) {
  bool quoted = false;
  for (size_t i = at; i < s.size(); i++) {
    if (quoted) {
      if (s[i] == '\\') i++;
      else if (s[i] == '"') quoted = false;
    } else if (s[i] == '"') {
      quoted = true;
    } else if (s[i] == '}') {
      return i;
    }
  }
  return s.size() - 1;
}

// The flat objects of the list `key` in a runtime's JSON (its steps or its arenas).
std::vector<std::string> objects(const std::string& runtime, const std::string& key) {
  std::vector<std::string> out;
  size_t at = runtime.find("\"" + key + "\": [");
  if (at == std::string::npos) return out;
  at += key.size() + 5;
  while (at < runtime.size() && runtime[at] == '{') {
    size_t end = object_end(runtime, at);
    out.push_back(runtime.substr(at, end - at + 1));
    at = end + 1;
    while (at < runtime.size() && (runtime[at] == ',' || runtime[at] == ' ')) at++;
  }
  return out;
}

std::string thousands(const std::string& n) {
  if (n.empty() || n == "null") return "-";
  std::string digits = n[0] == '-' ? n.substr(1) : n, out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n[0] == '-' ? "-" : "") + out;
}

void print_table(const std::vector<std::pair<std::string, std::string>>& runtimes, bool cuda) {
  for (auto& [label, rt] : runtimes) {
    std::printf("\n%s: %s\n", label.c_str(), field(rt, "runner").c_str());
    std::string failure = field(rt, "failure");
    if (!failure.empty() && failure != "null") std::printf("  FAILED: %s\n", failure.c_str());
    if (cuda) {
      std::printf("  %-24s %14s %14s %14s  %s\n", "step", "device bytes", "driver bytes", "host bytes", "result");
    } else {
      std::printf("  %-24s %14s %14s  %s\n", "step", "device bytes", "host bytes", "result");
    }
    for (auto& s : objects(rt, "steps")) {
      std::string err = field(s, "error"), correct = field(s, "correct");
      std::string result = err != "null" && !err.empty() ? "error: " + err
                           : correct == "true"             ? "correct"
                           : correct == "false"            ? "WRONG output"
                                                           : "ok";
      if (cuda) {
        std::printf("  %-24s %14s %14s %14s  %s\n", field(s, "step").c_str(),
                    thousands(field(s, "device_bytes")).c_str(), thousands(field(s, "driver_device_bytes")).c_str(),
                    thousands(field(s, "host_bytes")).c_str(), result.c_str());
      } else {
        std::printf("  %-24s %14s %14s  %s\n", field(s, "step").c_str(), thousands(field(s, "device_bytes")).c_str(),
                    thousands(field(s, "host_bytes")).c_str(), result.c_str());
      }
    }
    size_t notes = rt.find("\"notes\": [");
    for (size_t at = notes == std::string::npos ? rt.size() : notes + 10; at < rt.size() && rt[at] == '"';) {
      size_t end = object_end(rt, at + 1);  // no brace in a note: the list's end bounds the scan
      std::string rest = rt.substr(at, end - at);
      std::string note = field("{\"n\": " + rest, "n");
      std::printf("  note: %s\n", note.c_str());
      size_t close = at + 1;
      for (; close < rt.size() && rt[close] != '"'; close++) {
        if (rt[close] == '\\') close++;
      }
      at = close + 1;
      while (at < rt.size() && (rt[at] == ',' || rt[at] == ' ')) at++;
    }
    for (auto& a : objects(rt, "arenas")) {
      std::string why = field(a, "why");
      std::printf("  arena: %s, runtime buffer %s (mem_id %s), %s, %s bytes: %s%s\n", field(a, "when").c_str(),
                  field(a, "runtime_index").c_str(), field(a, "mem_id").c_str(), field(a, "device").c_str(),
                  thousands(field(a, "bytes")).c_str(), field(a, "memory").c_str(),
                  why == "null" ? "" : ("; " + why).c_str());
    }
  }
}

int run_both(const Options& o0) {
  Options o = o0;
  Backend b = choose(o);
  o.backend = b.name;
  std::printf("%s: %s\n", kProg, b.line.c_str());
  std::fflush(stdout);
  int64_t planned = planned_device_bytes(o);
  std::vector<std::string> labels;
  if (o.loader == "both" || o.loader == "before") labels.push_back("before");
  if (o.loader == "both" || o.loader == "after") labels.push_back("after");
  std::vector<std::pair<std::string, std::string>> runtimes;
  for (auto& l : labels) runtimes.emplace_back(l, spawn_runtime(o, l));
  std::string published = o.published.empty() ? "" : read_file(o.published);
  while (!published.empty() && (published.back() == '\n' || published.back() == ' ')) published.pop_back();
  std::string doc = "{\"schema\": \"pte_lab.device_placement\", \"version\": 1, \"side\": " + jopt(o.side) +
                    ", \"device\": " + jstr(o.device) + ", \"planned_device_bytes\": " +
                    (planned < 0 ? std::string("null") : jint(planned)) + ", \"runtimes\": [";
  for (size_t i = 0; i < runtimes.size(); i++) doc += (i ? ", " : "") + runtimes[i].second;
  doc += "], \"published\": " + (published.empty() ? std::string("null") : published) + ", \"measurement\": {" +
         "\"tool\": " + jstr(std::string(kProg) + ", built against executorch " PTE_LAB_EXECUTORCH_VERSION) +
         ", \"backend\": " + jstr(b.name) + ", \"backend_line\": " + jstr(b.line) + ", \"program\": " + jstr(o.pte);
  if (b.name == "cuda") {
    doc += ", \"gpu\": " + jstr(b.info.name) + ", \"driver_version\": " + jint(b.info.driver_version) +
           ", \"compute_capability\": " + jstr(format("%d.%d", b.info.compute_major, b.info.compute_minor)) +
           ", \"device_total_bytes\": " + jint(static_cast<int64_t>(b.info.total_bytes)) +
           ", \"managed_memory\": " + (b.info.managed_memory ? "true" : "false") +
           ", \"concurrent_managed_access\": " + (b.info.concurrent_managed_access ? "true" : "false") +
           ", \"pageable_memory_access\": " + (b.info.pageable_memory_access ? "true" : "false") +
           ", \"driver_figure\": " + jstr(kDriverFigure) + ", \"host_figure\": " + jstr(kHostFigureCuda);
  }
  doc += "}}\n";
  std::printf("program %s: %s planned bytes on %s\n", o.pte.c_str(), thousands(jint(planned)).c_str(), o.device.c_str());
  print_table(runtimes, b.name == "cuda");
  if (b.name == "cuda") std::printf("\n%s.\n%s.\n", kDriverFigure, kHostFigureCuda);
  if (!o.json.empty()) {
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size()) {
      std::fprintf(stderr, "%s: error: cannot write %s\n", kProg, o.json.c_str());
      return 2;
    }
    std::fclose(f);
    std::printf("\nJSON (pte_lab.device_placement, version 1) written to %s\n", o.json.c_str());
  }
  for (auto& [label, rt] : runtimes) {
    std::string failure = field(rt, "failure");
    if (!failure.empty() && failure != "null") return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!o.one.empty()) {
    if (o.one != "before" && o.one != "after") usage_error("--one: before or after");
    if (o.backend == "auto") usage_error("--one needs --backend cuda or emulated");
    std::string result = one_runtime(o);
    std::printf("RESULT %s\n", result.c_str());
    return 0;
  }
  if (access(o.pte.c_str(), R_OK) != 0) usage_error("--pte " + o.pte + ": no such file");
  return run_both(o);
}
