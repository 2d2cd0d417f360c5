// The before/after runner's report: the JSON document and the table (see placement_report.h).

#include "placement_report.h"

#include <cstdio>

namespace pte_lab {

const char* const kDriverFigure =
    "driver_device_bytes is the change in the device's used memory (total - free) that cuMemGetInfo reports, "
    "after synchronizing: it counts the whole device (every process and context on it), allocations rounded "
    "up to the driver's page granularity, and managed memory only while its pages are resident on the device "
    "(prefetched there at allocation; a host delegate touching them moves them back to the host)";

const char* const kHostFigureCuda =
    "host_bytes counts every heap allocation and anonymous mapping of the process in the step, the CUDA "
    "driver's own included (its bookkeeping, and whatever it maps on the host for managed memory)";

namespace {

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
std::string jstr(const std::optional<std::string>& s) { return s ? jstr(*s) : "null"; }
std::string jint(int64_t v) { return std::to_string(v); }
std::string jopt(const std::optional<int64_t>& v) { return v ? jint(*v) : "null"; }
std::string jnull_if_empty(const std::string& s) { return s.empty() ? "null" : jstr(s); }
std::string jbool(bool v) { return v ? "true" : "false"; }

template <typename T, typename F>
std::string jlist(const std::vector<T>& items, F&& each) {
  std::string s;
  for (size_t i = 0; i < items.size(); i++) s += (i ? ", " : "") + each(items[i]);
  return "[" + s + "]";
}

std::string step_json(const StepRecord& r) {
  return "{\"step\": " + jstr(r.step) + ", \"error\": " + jnull_if_empty(r.error) +
         ", \"correct\": " + (r.correct ? jbool(*r.correct) : "null") + ", \"seconds\": " + format("%.6f", r.seconds) +
         ", \"device_bytes\": " + jopt(r.device_bytes) + ", \"host_bytes\": " + jopt(r.host_bytes) +
         ", \"device_events\": " + jopt(r.device_events) + ", \"driver_device_bytes\": " +
         jopt(r.driver_device_bytes) + "}";
}

std::string arena_json(const ArenaRecord& a) {
  return "{\"when\": " + jstr(a.when) + ", \"methods\": " + jstr(a.methods) + ", \"runtime_index\": " +
         jint(a.runtime_index) + ", \"mem_id\": " + jint(a.runtime_index + 1) + ", \"device\": " + jstr(a.device) +
         ", \"bytes\": " + jint(a.bytes) + ", \"memory\": " + jstr(a.memory) + ", \"why\": " + jnull_if_empty(a.why) +
         ", \"touched_by\": " + jlist(a.touched_by, [](const std::string& u) { return jstr(u); }) + "}";
}

}  // namespace

std::string loader_run_json(const LoaderRun& run) {
  const RuntimeRecord& r = run.runtime;
  return "{\"label\": " + jstr(r.label) + ", \"python\": null, \"executorch_version\": " +
         jstr(r.executorch_version) + ", \"measured_by\": " + jstr(r.measured_by) +
         ", \"host_measured_by\": " + jstr(r.host_measured_by) + ", \"steps\": " + jlist(run.steps, step_json) +
         ", \"failure\": " + jstr(r.failure) + ", \"runner\": " + jstr(r.runner) + ", \"backend\": " +
         jstr(r.backend) + ", \"arenas\": " + jlist(run.arenas, arena_json) +
         ", \"notes\": " + jlist(run.notes, [](const std::string& n) { return jstr(n); }) + "}";
}

namespace {

std::string measurement_json(const Measurement& m) {
  std::string s = "{\"tool\": " + jstr(m.tool) + ", \"backend\": " + jstr(m.backend) +
                  ", \"backend_line\": " + jstr(m.backend_line) + ", \"program\": " + jstr(m.program);
  if (m.cuda) {
    const PteLabCudaInfo& i = *m.cuda;
    s += ", \"gpu\": " + jstr(std::string(i.name)) + ", \"driver_version\": " + jint(i.driver_version) +
         ", \"compute_capability\": " + jstr(format("%d.%d", i.compute_major, i.compute_minor)) +
         ", \"device_total_bytes\": " + jint(static_cast<int64_t>(i.total_bytes)) +
         ", \"managed_memory\": " + jbool(i.managed_memory) +
         ", \"concurrent_managed_access\": " + jbool(i.concurrent_managed_access) +
         ", \"pageable_memory_access\": " + jbool(i.pageable_memory_access) +
         ", \"driver_figure\": " + jstr(std::string(kDriverFigure)) +
         ", \"host_figure\": " + jstr(std::string(kHostFigureCuda));
  }
  return s + "}";
}

const char* text_or_empty(const std::optional<std::string>& s) { return s ? s->c_str() : ""; }

std::string result(const StepRecord& s) {
  if (!s.error.empty()) return "error: " + s.error;
  if (s.correct) return *s.correct ? "correct" : "WRONG output";
  return "ok";
}

}  // namespace

std::string document_json(const Document& doc) {
  return "{\"schema\": \"pte_lab.device_placement\", \"version\": 1, \"side\": " + jopt(doc.side) +
         ", \"device\": " + jstr(doc.device) + ", \"planned_device_bytes\": " + jopt(doc.planned_device_bytes) +
         ", \"runtimes\": " + jlist(doc.runs, loader_run_json) +
         ", \"published\": " + (doc.published.empty() ? std::string("null") : doc.published) +
         ", \"measurement\": " + measurement_json(doc.measurement) + "}\n";
}

std::string thousands(const std::optional<int64_t>& v) {
  if (!v) return "-";
  std::string n = std::to_string(*v);
  std::string digits = n[0] == '-' ? n.substr(1) : n, out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n[0] == '-' ? "-" : "") + out;
}

void print_table(const std::vector<LoaderRun>& runs, bool cuda) {
  for (const LoaderRun& run : runs) {
    std::printf("\n%s: %s\n", run.runtime.label.c_str(), text_or_empty(run.runtime.runner));
    if (run.failed()) std::printf("  FAILED: %s\n", run.runtime.failure->c_str());
    if (cuda) {
      std::printf("  %-24s %14s %14s %14s  %s\n", "step", "device bytes", "driver bytes", "host bytes", "result");
    } else {
      std::printf("  %-24s %14s %14s  %s\n", "step", "device bytes", "host bytes", "result");
    }
    for (const StepRecord& s : run.steps) {
      if (cuda) {
        std::printf("  %-24s %14s %14s %14s  %s\n", s.step.c_str(), thousands(s.device_bytes).c_str(),
                    thousands(s.driver_device_bytes).c_str(), thousands(s.host_bytes).c_str(), result(s).c_str());
      } else {
        std::printf("  %-24s %14s %14s  %s\n", s.step.c_str(), thousands(s.device_bytes).c_str(),
                    thousands(s.host_bytes).c_str(), result(s).c_str());
      }
    }
    for (const std::string& note : run.notes) std::printf("  note: %s\n", note.c_str());
    for (const ArenaRecord& a : run.arenas) {
      std::printf("  arena: %s, runtime buffer %lld (mem_id %lld), %s, %s bytes: %s%s\n", a.when.c_str(),
                  static_cast<long long>(a.runtime_index), static_cast<long long>(a.runtime_index + 1),
                  a.device.c_str(), thousands(a.bytes).c_str(), a.memory.c_str(),
                  a.why.empty() ? "" : ("; " + a.why).c_str());
    }
  }
}

}  // namespace pte_lab
