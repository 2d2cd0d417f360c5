// What the before/after runner reports: the pte_lab.device_placement document (version 1, the one
// `pte-lab measure --json` writes; pte_lab.experiments.device_placement.Report reads it) and the table
// it prints, both from the records its children sent (placement_lines.h).
#ifndef PTE_LAB_PLACEMENT_REPORT_H
#define PTE_LAB_PLACEMENT_REPORT_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda_device.h"
#include "placement_lines.h"

namespace pte_lab {

// What the driver's figure is, said wherever it is shown.
extern const char* const kDriverFigure;
// What the host figure counts on CUDA, said with the driver's figure.
extern const char* const kHostFigureCuda;

// One loader's run, as the parent reports it.
struct LoaderRun {
  RuntimeRecord runtime;
  std::vector<StepRecord> steps;
  std::vector<ArenaRecord> arenas;
  std::vector<std::string> notes;
  bool failed() const { return runtime.failure.has_value(); }
};

// How the run was measured: the document's "measurement".
struct Measurement {
  std::string tool, backend, backend_line, program;
  std::optional<PteLabCudaInfo> cuda;  // the GPU, on the cuda backend
};

struct Document {
  std::optional<int64_t> side;
  std::string device;
  std::optional<int64_t> planned_device_bytes;
  std::vector<LoaderRun> runs;
  std::string published;  // the published figures' JSON, verbatim (empty: none)
  Measurement measurement;
};

// One loader's run as the document holds it (an element of "runtimes").
std::string loader_run_json(const LoaderRun& run);

// The document as JSON, one line and a newline.
std::string document_json(const Document& doc);

// The table on stdout: per loader, its steps (bytes and result), notes and arenas.
void print_table(const std::vector<LoaderRun>& runs, bool cuda);

// 1234567 -> "1,234,567"; none -> "-".
std::string thousands(const std::optional<int64_t>& n);

}  // namespace pte_lab

#endif  // PTE_LAB_PLACEMENT_REPORT_H
