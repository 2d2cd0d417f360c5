// The two loaders of ExecuTorch's Python Runtime.load_program, mirrored in C++, and what they measure.
//
// They mirror extension/pybindings/pybindings.cpp (ProgramMemory and PyProgram):
//   before  executorch < 1.5: at load_program, one host arena per planned
//           buffer index, sized by the largest over every method, shared by
//           all methods; device-tagged buffers included (std::vector<uint8_t>).
//   after   executorch >= 1.5 (PR #22058): host-only methods share host arenas
//           sized over the host-only methods, at load_program; a method with a
//           device-tagged buffer gets private arenas at its load_method, device
//           ones first (DeviceMemoryBuffer, from the registered allocator).
// and run the steps of pte_lab's device-placement experiment
// (pte_lab/experiments/_placement_steps.py) under one of them, writing each step,
// arena and note as a line (placement_lines.h) as it goes.
#ifndef PTE_LAB_PLACEMENT_LOADERS_H
#define PTE_LAB_PLACEMENT_LOADERS_H

#include <executorch/runtime/core/portable_type/device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arena_users.h"
#include "placement_lines.h"

namespace pte_lab {

constexpr int32_t kCudaType = 1;  // ExecuTorch's DeviceType::CUDA

// "cpu", "cuda:N", or "deviceT:N" for another type.
std::string device_name(const executorch::runtime::etensor::Device& d);

// A text file (pte_lab.experiments.bundle writes it):
//   pte_lab.reference 1
//   codes FILE SCALE          int8 codes; input value = code * SCALE (every input, in order)
//   input DTYPE NBYTES        one line per input, in the method's input order
//   expect METHOD NBYTES CRC32  the method's first output, as eager PyTorch computed it
struct Reference {
  std::vector<std::vector<float>> inputs;
  std::map<std::string, std::pair<uint64_t, uint32_t>> expect;  // method -> (nbytes, crc32)
};
bool load_reference(const std::string& path, Reference* ref, std::string* why);

// Device bytes from the device ledger (device_ledger.h) that the allocator writes, and on CUDA also
// from the driver (cuMemGetInfo); host bytes from pte_lab's allocation counter when it is preloaded,
// glibc's statistics otherwise.
class Meter {
 public:
  explicit Meter(std::string backend);  // "cuda" or "emulated"
  const std::string& backend() const { return backend_; }
  std::string measured_by() const;  // how device bytes are measured
  std::string host_measured_by() const;
  std::optional<int64_t> host() const;
  int64_t device();  // device bytes allocated and not freed, from the ledger
  uint64_t events() const;
  std::optional<int64_t> driver() const;  // device bytes in use as the driver sees them (total - free), CUDA only

 private:
  struct Impl;
  std::string backend_;
  std::shared_ptr<Impl> impl_;
};

struct LoaderOptions {
  std::string pte;
  std::string label;   // "before" or "after": which loader
  std::string memory;  // CUDA device arenas: "auto" (from who touches them in the file), "managed" or "device"
};

// Runs the steps under one loader: load_program, load_method of each method, execute each (device
// methods first, then host ones, then the device ones again), release.
class Runner {
 public:
  Runner(LoaderOptions o, Meter* meter, const std::vector<ArenaUsers>& users, const Reference* ref,
         LineWriter* out);
  ~Runner();
  void run();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace pte_lab

#endif  // PTE_LAB_PLACEMENT_LOADERS_H
