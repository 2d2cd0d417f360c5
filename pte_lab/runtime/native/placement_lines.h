// The line protocol between the before/after runner's parent and the child that runs one loader.
//
// A child (pte_lab_placement --one LABEL) writes one record a line, flushed as it goes, so that the
// parent keeps the steps done and names the step a crash happened in:
//
//   pte_lab.placement_lines 1                       first, always: the protocol and its version
//   BEGIN    step                                   a step starts
//   STEP     step error correct seconds device_bytes host_bytes device_events driver_device_bytes
//   ARENA    when methods runtime_index device bytes memory why touched_by...
//   NOTE     text
//   RUNTIME  label executorch_version measured_by host_measured_by failure runner backend
//   END                                             last: nothing was lost
//
// Fields are separated by one tab; in a field, backslash, tab, newline and carriage return are
// written \\ \t \n \r, and a missing value (JSON's null) is \N alone. Integers are decimal, correct is
// true or false, seconds is %.6f. ARENA's touched_by is every field after why (none or more).
// pte_lab.experiments.placement_lines reads the same lines in Python; the field names below are the
// one home of both (it reads them from this header).
#ifndef PTE_LAB_PLACEMENT_LINES_H
#define PTE_LAB_PLACEMENT_LINES_H

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#define PTE_LAB_PLACEMENT_LINES_HEAD "pte_lab.placement_lines 1"
#define PTE_LAB_STEP_FIELDS(X) \
  X(step) X(error) X(correct) X(seconds) X(device_bytes) X(host_bytes) X(device_events) X(driver_device_bytes)
#define PTE_LAB_ARENA_FIELDS(X) X(when) X(methods) X(runtime_index) X(device) X(bytes) X(memory) X(why)
#define PTE_LAB_RUNTIME_FIELDS(X) \
  X(label) X(executorch_version) X(measured_by) X(host_measured_by) X(failure) X(runner) X(backend)

namespace pte_lab {

// One step of a loader: what it cost and how it ended (an empty error: it succeeded).
struct StepRecord {
  std::string step, error;
  std::optional<bool> correct;
  double seconds = 0;
  std::optional<int64_t> device_bytes, host_bytes, device_events, driver_device_bytes;
};

// One arena a loader allocated.
struct ArenaRecord {
  std::string when, methods, device, memory, why;  // an empty why: none given
  int64_t runtime_index = 0, bytes = 0;
  std::vector<std::string> touched_by;  // a device arena: who touches it, as the file says
};

// What a loader's run was: how it measured, and why it could not run (an empty failure: it ran).
// Missing values (a child that died before it said) are std::nullopt.
struct RuntimeRecord {
  std::string label;
  std::optional<std::string> executorch_version, measured_by, host_measured_by, failure, runner, backend;
};

// Everything one child said, in the order it said it.
struct ChildLines {
  std::vector<std::string> begun;  // BEGIN: the steps started
  std::vector<StepRecord> steps;
  std::vector<ArenaRecord> arenas;
  std::vector<std::string> notes;
  std::optional<RuntimeRecord> runtime;
  bool ended = false;  // END was read
  bool cut = false;    // the last line had no newline (a child that died while writing it)
};

// Writes the records to `out`, a line each, flushed.
class LineWriter {
 public:
  explicit LineWriter(FILE* out);
  void begin(const std::string& step);
  void step(const StepRecord& r);
  void arena(const ArenaRecord& a);
  void note(const std::string& text);
  void runtime(const RuntimeRecord& r);
  void end();

 private:
  void line(const std::vector<std::optional<std::string>>& fields);
  FILE* out_;
};

// printf into a std::string (up to 1 KiB).
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Reads a child's output. On a line that is not the protocol (no version line first, a kind it does not
// know, a field count or value that does not fit, a bad escape, a last line cut short), it keeps what
// came before, stops, and returns false with one line in `why` that names the line and what is wrong.
bool read_lines(const std::string& text, ChildLines* out, std::string* why);

}  // namespace pte_lab

#endif  // PTE_LAB_PLACEMENT_LINES_H
