// pte_lab_placement: the loader fix's before/after measurement as a standalone program (no Python).
//
// For a .pte it runs the steps of pte_lab's device-placement experiment under two loaders that mirror
// ExecuTorch's Python Runtime.load_program before and after PR #22058 (placement_loaders.h). Each
// loader runs in a fresh process (this program started again with --one), so a native failure in one
// cannot take the other down; the child sends what it measured as lines (placement_lines.h) and the
// parent reports them (placement_report.h).
//
// The backend is chosen at run time: cuda where libcuda.so.1 opens and sees the device, else the
// emulated device.
//
// Output: the pte_lab.device_placement document (version 1), the one
// `pte-lab measure --json` writes, plus a table on stdout.

#include "glibc_compat.h"  // first: it binds the dl* calls below to old glibc versions

#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "arena_users.h"
#include "cuda_device.h"
#include "placement_lines.h"
#include "placement_loaders.h"
#include "placement_report.h"

#ifndef PTE_LAB_EXECUTORCH_VERSION
#define PTE_LAB_EXECUTORCH_VERSION "unknown"
#endif

extern "C" int32_t pte_lab_register(int32_t type);  // the emulated device (emulated_device.cpp)
extern char** environ;

using executorch::extension::MmapDataLoader;
using executorch::runtime::Program;
using pte_lab::format;
using pte_lab::kCudaType;

namespace {

const char* kProg = "pte_lab_placement";

// ----------------------------------------------------------------- options
struct Options {
  std::string pte, reference, published, json, loader = "both", backend = "auto", device = "cuda:0";
  std::string memory = "auto";  // CUDA device arenas: from who touches them in the file, or forced
  std::string one;    // internal: run one loader in this process, its records as lines (placement_lines.h)
  std::string lines;  // internal, with --one: where the lines go (default: stdout)
  std::string read_lines;  // internal: read a child's lines from this file, print its run as the document holds it
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
    else if (a == "--lines") o.lines = value();
    else if (a == "--read-lines") o.read_lines = value();
    else if (a == "--side") o.side = std::strtoll(value().c_str(), nullptr, 10);
    else if (a == "--verbose") o.verbose = true;
    else if (a == "--help" || a == "-h") usage_error("help");
    else usage_error("unknown argument " + a);
  }
  if (o.pte.empty() && o.read_lines.empty()) usage_error("--pte FILE is required");
  if (o.loader != "both" && o.loader != "before" && o.loader != "after") usage_error("--loader: both, before or after");
  if (o.backend != "auto" && o.backend != "cuda" && o.backend != "emulated") {
    usage_error("--backend: auto, cuda or emulated");
  }
  if (o.device.rfind("cuda:", 0) != 0 || o.device.size() < 6) usage_error("--device: cuda:N");
  if (o.memory != "auto" && o.memory != "managed" && o.memory != "device") usage_error("--memory: auto, managed or device");
  return o;
}

int device_index(const Options& o) { return std::atoi(o.device.c_str() + 5); }


// ------------------------------------------------------------- backends
struct Backend {
  std::string name;         // "cuda" or "emulated"
  std::string line;         // the one line that says which, and why
  PteLabCudaInfo info{};
};

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
    b.line = "backend cuda: " + describe_cuda(b.info);
    return b;
  }
  if (o.backend == "cuda") {
    std::fprintf(stderr, "%s: error: --backend cuda: %s\n", kProg, why);
    std::exit(2);
  }
  b.name = "emulated";
  b.line = o.backend == "emulated" ? "backend emulated (asked for): device memory is host memory, counted in the "
                                     "emulated device's ledger"
                                   : std::string("backend emulated: ") + why +
                                         "; device memory is host memory, counted in the emulated device's ledger";
  return b;
}

// ---------------------------------------------------------- one loader

// ---------------------------------------------------------- one loader
std::string loader_line(const std::string& label) {
  return label == "before"
             ? "Runtime.load_program of executorch < 1.5 (every planned arena from host memory, shared by all "
               "methods, at load_program), mirrored in C++"
             : "Runtime.load_program of executorch >= 1.5 (host-only methods share host arenas at load_program; a "
               "device method's arenas are its own, at load_method, device first), mirrored in C++";
}

// The child: runs one loader in this process and writes its records, a line each, as it goes.
int one_runtime(const Options& o) {
  FILE* out = o.lines.empty() ? stdout : std::fopen(o.lines.c_str(), "w");
  if (out == nullptr) usage_error("--lines " + o.lines + ": cannot write it");
  pte_lab::LineWriter lines(out);
  executorch::runtime::runtime_init();
  pte_lab::Meter meter(o.backend);
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
  std::vector<uint8_t> bytes;
  std::string why;
  if (!pte_lab::read_program_bytes(o.pte.c_str(), &bytes, &why) ||
      !pte_lab::read_arena_users(bytes.data(), bytes.size(), &users, &why)) {
    lines.note("who touches each device arena could not be read (" + why + "): CUDA arenas get managed memory");
  }
  std::vector<uint8_t>().swap(bytes);
  pte_lab::Reference ref;
  bool have_ref = false;
  if (!o.reference.empty()) {
    if (!pte_lab::load_reference(o.reference, &ref, &why)) {
      failure = why;
    } else {
      have_ref = true;
    }
  }
  if (failure.empty()) {
    pte_lab::Runner(pte_lab::LoaderOptions{o.pte, o.one, o.memory}, &meter, users, have_ref ? &ref : nullptr, &lines)
        .run();
  }
  pte_lab::RuntimeRecord r;
  r.label = o.one;
  r.executorch_version = PTE_LAB_EXECUTORCH_VERSION;
  r.measured_by = meter.measured_by();
  r.host_measured_by = meter.host_measured_by();
  if (!failure.empty()) r.failure = failure;
  r.runner = std::string(kProg) + " (native): " + loader_line(o.one);
  r.backend = o.backend;
  lines.runtime(r);
  lines.end();
  if (out != stdout) std::fclose(out);
  return 0;
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

// The run a child reported in full.
pte_lab::LoaderRun complete_run(const pte_lab::ChildLines& sent) {
  pte_lab::LoaderRun run;
  run.runtime = *sent.runtime;
  run.steps = sent.steps;
  run.arenas = sent.arenas;
  run.notes = sent.notes;
  return run;
}

// --read-lines FILE: a child's lines, read as the parent reads them; its run's JSON, or the one line that
// says which line is not the protocol (exit 2)
int read_lines_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) usage_error("--read-lines " + path + ": cannot read it");
  std::fclose(f);
  pte_lab::ChildLines sent;
  std::string why;
  if (pte_lab::read_lines(read_file(path), &sent, &why) && !(sent.ended && sent.runtime)) {
    why = "the lines end before their RUNTIME and END records";
  }
  if (!why.empty()) {
    std::fprintf(stderr, "%s: error: %s: %s\n", kProg, path.c_str(), why.c_str());
    return 2;
  }
  std::printf("%s\n", pte_lab::loader_run_json(complete_run(sent)).c_str());
  return 0;
}

// A loader's run that could not report itself: the failure, and the steps and arenas it sent before.
pte_lab::LoaderRun failed_run(const std::string& label, const Options& o, const std::string& failure,
                              const pte_lab::ChildLines& sent = {}) {
  pte_lab::LoaderRun run;
  run.runtime.label = label;
  run.runtime.executorch_version = PTE_LAB_EXECUTORCH_VERSION;
  run.runtime.failure = failure;
  run.runtime.runner = std::string(kProg) + " (native)";
  run.runtime.backend = o.backend;
  run.steps = sent.steps;
  run.arenas = sent.arenas;
  return run;
}

// The last lines of a child's stderr that are not ExecuTorch's information ("I ..."), joined by " | ".
std::string stderr_tail(const std::string& err) {
  std::vector<std::string> lines;
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
  return tail;
}

// Runs one loader in a fresh process: what it sent, or a failure saying how it ended.
pte_lab::LoaderRun spawn_runtime(const Options& o, const std::string& label) {
  std::string exe = self_path();
  char out_path[] = "/tmp/pte_lab_placement_outXXXXXX";
  char err_path[] = "/tmp/pte_lab_placement_errXXXXXX";
  char lines_path[] = "/tmp/pte_lab_placement_linesXXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path), lines_fd = mkstemp(lines_path);
  if (lines_fd >= 0) close(lines_fd);
  if (exe.empty() || out_fd < 0 || err_fd < 0 || lines_fd < 0) {
    return failed_run(label, o, "cannot start a process for it");
  }
  std::vector<std::string> args = {exe,         "--pte",   o.pte,      "--one",    label,    "--lines", lines_path,
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
  std::string text = read_file(lines_path), err = read_file(err_path);
  unlink(out_path);
  unlink(err_path);
  unlink(lines_path);
  if (o.verbose && !err.empty()) std::fprintf(stderr, "--- %s (%s) stderr ---\n%s", label.c_str(), o.backend.c_str(), err.c_str());
  if (rc != 0) return failed_run(label, o, std::string("cannot start ") + exe + ": " + std::strerror(rc));
  pte_lab::ChildLines sent;
  std::string bad;
  bool read = pte_lab::read_lines(text, &sent, &bad);
  bool exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (read && sent.ended && sent.runtime) return complete_run(sent);
  std::string how = WIFSIGNALED(status) ? std::string("killed by ") + strsignal(WTERMSIG(status))
                                        : "exit " + std::to_string(WEXITSTATUS(status));
  // a line that is not the protocol is said as such (a crash cuts at most the last line short)
  if (!read && !text.empty() && (exited || !sent.cut)) {
    return failed_run(label, o, "its process (" + how + ") sent a line the runner cannot read: " + bad, sent);
  }
  if (read && exited) {
    return failed_run(label, o, "its process (" + how + ") ended without its RUNTIME and END records", sent);
  }
  // it died: the step it died in, and the last lines it printed
  std::string where = sent.begun.size() > sent.steps.size() ? " in step '" + sent.begun.back() + "'" : "";
  std::string tail = stderr_tail(err);
  return failed_run(label, o, "process " + how + where + (tail.empty() ? "" : ": " + tail), sent);
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
      if (d.ok() && pte_lab::device_name(d.get()) == o.device) total += meta->memory_planned_buffer_size(i).get();
    }
  }
  return total;
}


int run_both(const Options& o0) {
  Options o = o0;
  Backend b = choose(o);
  o.backend = b.name;
  std::printf("%s: %s\n", kProg, b.line.c_str());
  std::fflush(stdout);
  pte_lab::Document doc;
  int64_t planned = planned_device_bytes(o);
  doc.side = o.side;
  doc.device = o.device;
  if (planned >= 0) doc.planned_device_bytes = planned;
  std::vector<std::string> labels;
  if (o.loader == "both" || o.loader == "before") labels.push_back("before");
  if (o.loader == "both" || o.loader == "after") labels.push_back("after");
  for (auto& l : labels) doc.runs.push_back(spawn_runtime(o, l));
  doc.published = o.published.empty() ? "" : read_file(o.published);
  while (!doc.published.empty() && (doc.published.back() == '\n' || doc.published.back() == ' ')) {
    doc.published.pop_back();
  }
  doc.measurement.tool = std::string(kProg) + ", built against executorch " PTE_LAB_EXECUTORCH_VERSION;
  doc.measurement.backend = b.name;
  doc.measurement.backend_line = b.line;
  doc.measurement.program = o.pte;
  if (b.name == "cuda") doc.measurement.cuda = b.info;
  std::string json = pte_lab::document_json(doc);
  std::printf("program %s: %s planned bytes on %s\n", o.pte.c_str(), pte_lab::thousands(planned).c_str(),
              o.device.c_str());
  pte_lab::print_table(doc.runs, b.name == "cuda");
  if (b.name == "cuda") std::printf("\n%s.\n%s.\n", pte_lab::kDriverFigure, pte_lab::kHostFigureCuda);
  if (!o.json.empty()) {
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr || std::fwrite(json.data(), 1, json.size(), f) != json.size()) {
      std::fprintf(stderr, "%s: error: cannot write %s\n", kProg, o.json.c_str());
      return 2;
    }
    std::fclose(f);
    std::printf("\nJSON (pte_lab.device_placement, version 1) written to %s\n", o.json.c_str());
  }
  for (auto& run : doc.runs) {
    if (run.failed()) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!o.read_lines.empty()) return read_lines_file(o.read_lines);
  if (!o.one.empty()) {
    if (o.one != "before" && o.one != "after") usage_error("--one: before or after");
    if (o.backend == "auto") usage_error("--one needs --backend cuda or emulated");
    return one_runtime(o);
  }
  if (access(o.pte.c_str(), R_OK) != 0) usage_error("--pte " + o.pte + ": no such file");
  return run_both(o);
}
