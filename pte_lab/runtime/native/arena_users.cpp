// Who touches each device arena: a small checked reader of the .pte flatbuffer (see arena_users.h).

#include "arena_users.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace pte_lab {
namespace {

// Union tags (program.fbs: KernelTypes and InstructionArguments; 0 is NONE).
constexpr uint8_t kTensor = 5, kTensorList = 10, kOptionalTensorList = 11;
constexpr uint8_t kKernelCall = 1, kDelegateCall = 2;

// Field slots, in program.fbs order (a union takes two: its type, then its value).
namespace slot {
constexpr int kProgramPlans = 1;
constexpr int kPlanName = 0, kPlanValues = 2, kPlanInputs = 3, kPlanOutputs = 4, kPlanChains = 5,
              kPlanOperators = 6, kPlanDelegates = 7, kPlanDevices = 9;
constexpr int kEValueType = 0, kEValue = 1;
constexpr int kTensorAllocation = 6, kAllocationMemoryId = 0;
constexpr int kListItems = 0;
constexpr int kOperatorName = 0, kOperatorOverload = 1;
constexpr int kDelegateId = 0;
constexpr int kChainInstructions = 2;
constexpr int kInstructionType = 0, kInstruction = 1;
constexpr int kCallIndex = 0, kCallArgs = 1;  // KernelCall.op_index / DelegateCall.delegate_index, then args
constexpr int kDeviceBufferIdx = 0, kDeviceType = 1, kDeviceIndex = 2;
}  // namespace slot

// A flatbuffer over bytes: every read is checked; the first bad one sets `bad` and names where.
class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}

  std::string bad;

  template <typename T>
  T get(size_t at, const char* what) {
    T v{};
    if (at > n_ || n_ - at < sizeof(T)) {
      fail(what, at);
      return v;
    }
    std::memcpy(&v, d_ + at, sizeof(T));
    return v;
  }

  // The table an offset at `at` points to (0 if absent or bad). Only the root offset sits at 0.
  size_t follow(size_t at, const char* what, bool root = false) {
    if (at == 0 && !root) return 0;
    uint32_t off = get<uint32_t>(at, what);
    if (!bad.empty()) return 0;
    if (off == 0 || at + off >= n_) {
      fail(what, at);
      return 0;
    }
    return at + off;
  }

  // Absolute position of a table's field, 0 when the field is absent.
  size_t field(size_t table, int index, const char* what) {
    if (table == 0) return 0;
    int32_t soff = get<int32_t>(table, what);
    int64_t vt = static_cast<int64_t>(table) - soff;
    if (!bad.empty() || vt < 0 || static_cast<size_t>(vt) >= n_) {
      fail(what, table);
      return 0;
    }
    uint16_t vt_len = get<uint16_t>(static_cast<size_t>(vt), what);
    size_t entry = 4 + 2 * static_cast<size_t>(index);
    if (!bad.empty() || entry + 2 > vt_len) return 0;
    uint16_t off = get<uint16_t>(static_cast<size_t>(vt) + entry, what);
    return off == 0 ? 0 : table + off;
  }

  template <typename T>
  T scalar(size_t table, int index, T dflt, const char* what) {
    size_t at = field(table, index, what);
    return at == 0 ? dflt : get<T>(at, what);
  }

  size_t table_field(size_t table, int index, const char* what) { return follow(field(table, index, what), what); }

  // A vector field: (position of its first element, length); length 0 when absent.
  std::pair<size_t, uint32_t> vec(size_t table, int index, size_t elem, const char* what) {
    size_t v = table_field(table, index, what);
    if (v == 0) return {0, 0};
    uint32_t len = get<uint32_t>(v, what);
    if (!bad.empty() || static_cast<uint64_t>(len) * elem > n_ - v - 4) {
      fail(what, v);
      return {0, 0};
    }
    return {v + 4, len};
  }

  std::string str(size_t table, int index, const char* what) {
    auto [at, len] = vec(table, index, 1, what);
    return at == 0 ? std::string() : std::string(reinterpret_cast<const char*>(d_ + at), len);
  }

  std::vector<int32_t> ints(size_t table, int index, const char* what) {
    auto [at, len] = vec(table, index, 4, what);
    std::vector<int32_t> out(len);
    for (uint32_t i = 0; i < len && bad.empty(); i++) out[i] = get<int32_t>(at + 4 * i, what);
    return out;
  }

  // The tables of a vector-of-tables field.
  std::vector<size_t> tables(size_t table, int index, const char* what) {
    auto [at, len] = vec(table, index, 4, what);
    std::vector<size_t> out;
    out.reserve(len);
    for (uint32_t i = 0; i < len && bad.empty(); i++) out.push_back(follow(at + 4 * i, what));
    return out;
  }

  size_t root() { return follow(0, "root table offset", true); }

 private:
  void fail(const char* what, size_t at) {
    if (bad.empty()) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: offset %zu is outside the %zu-byte flatbuffer", what, at, n_);
      bad = buf;
    }
  }

  const uint8_t* d_;
  size_t n_;
};

void add_unique(std::vector<std::string>* v, const std::string& s) {
  if (std::find(v->begin(), v->end(), s) == v->end()) v->push_back(s);
}

}  // namespace

bool is_device_backend(const std::string& backend_id, int32_t device_type) {
  // ExecuTorch's CUDA backend (backends/cuda) runs its delegates on the CUDA device.
  return device_type == 1 && backend_id == "CudaBackend";
}

bool read_arena_users(const uint8_t* data, size_t size, std::vector<ArenaUsers>* out, std::string* why) {
  Reader r(data, size);
  size_t program = r.root();
  for (size_t plan : r.tables(program, slot::kProgramPlans, "Program.execution_plan")) {
    if (!r.bad.empty()) break;
    std::string name = r.str(plan, slot::kPlanName, "ExecutionPlan.name");
    // the device arenas of this method: mem_id -> (type, index)
    std::map<int64_t, std::pair<int32_t, int32_t>> devices;
    for (size_t d : r.tables(plan, slot::kPlanDevices, "ExecutionPlan.non_const_buffer_device")) {
      int32_t idx = r.scalar<int32_t>(d, slot::kDeviceBufferIdx, 0, "NonConstBufferDevice.buffer_idx");
      int32_t type = r.scalar<int8_t>(d, slot::kDeviceType, 0, "NonConstBufferDevice.device_type");
      int32_t index = r.scalar<int8_t>(d, slot::kDeviceIndex, 0, "NonConstBufferDevice.device_index");
      if (type != 0) devices[idx] = {type, index};
    }
    if (devices.empty()) continue;
    // each value's arena (tensors), or the values a list holds
    std::vector<size_t> values = r.tables(plan, slot::kPlanValues, "ExecutionPlan.values");
    std::vector<int64_t> mem_of(values.size(), 0);
    std::vector<std::vector<int32_t>> items(values.size());
    for (size_t v = 0; v < values.size() && r.bad.empty(); v++) {
      uint8_t tag = r.scalar<uint8_t>(values[v], slot::kEValueType, 0, "EValue.val_type");
      size_t val = r.table_field(values[v], slot::kEValue, "EValue.val");
      if (tag == kTensor) {
        size_t alloc = r.table_field(val, slot::kTensorAllocation, "Tensor.allocation_info");
        if (alloc != 0) mem_of[v] = r.scalar<uint32_t>(alloc, slot::kAllocationMemoryId, 0, "AllocationDetails.memory_id");
      } else if (tag == kTensorList || tag == kOptionalTensorList) {
        items[v] = r.ints(val, slot::kListItems, "TensorList.items");
      }
    }
    std::map<int64_t, ArenaUsers> found;
    for (auto& [mem_id, dev] : devices) {
      ArenaUsers a;
      a.method = name;
      a.mem_id = mem_id;
      a.device_type = dev.first;
      a.device_index = dev.second;
      found[mem_id] = a;
    }
    // the arenas a value (or the tensors of a list) lives in
    auto arenas_of = [&](int32_t v) {
      std::set<int64_t> s;
      if (v < 0 || static_cast<size_t>(v) >= values.size()) return s;
      if (mem_of[v] != 0) s.insert(mem_of[v]);
      for (int32_t item : items[v]) {
        if (item >= 0 && static_cast<size_t>(item) < values.size() && mem_of[item] != 0) s.insert(mem_of[item]);
      }
      return s;
    };
    auto note = [&](const std::vector<int32_t>& args, const std::string& user, bool on_device) {
      for (int32_t v : args) {
        for (int64_t m : arenas_of(v)) {
          auto it = found.find(m);
          if (it == found.end()) continue;
          add_unique(on_device ? &it->second.device_users : &it->second.host_users, user);
        }
      }
    };
    std::vector<int32_t> inputs = r.ints(plan, slot::kPlanInputs, "ExecutionPlan.inputs");
    for (size_t i = 0; i < inputs.size(); i++) {
      note({inputs[i]}, "method input " + std::to_string(i) + " (set by the caller, on the host)", false);
    }
    std::vector<int32_t> outputs = r.ints(plan, slot::kPlanOutputs, "ExecutionPlan.outputs");
    for (size_t i = 0; i < outputs.size(); i++) {
      note({outputs[i]}, "method output " + std::to_string(i) + " (read by the caller, on the host)", false);
    }
    std::vector<std::string> ops;
    for (size_t op : r.tables(plan, slot::kPlanOperators, "ExecutionPlan.operators")) {
      std::string n = r.str(op, slot::kOperatorName, "Operator.name");
      std::string o = r.str(op, slot::kOperatorOverload, "Operator.overload");
      ops.push_back(o.empty() ? n : n + "." + o);
    }
    std::vector<std::string> backends;
    for (size_t d : r.tables(plan, slot::kPlanDelegates, "ExecutionPlan.delegates")) {
      backends.push_back(r.str(d, slot::kDelegateId, "BackendDelegate.id"));
    }
    for (size_t chain : r.tables(plan, slot::kPlanChains, "ExecutionPlan.chains")) {
      for (size_t ins : r.tables(chain, slot::kChainInstructions, "Chain.instructions")) {
        if (!r.bad.empty()) break;
        uint8_t tag = r.scalar<uint8_t>(ins, slot::kInstructionType, 0, "Instruction.instr_args_type");
        if (tag != kKernelCall && tag != kDelegateCall) continue;
        size_t call = r.table_field(ins, slot::kInstruction, "Instruction.instr_args");
        int32_t index = r.scalar<int32_t>(call, slot::kCallIndex, 0, "call index");
        std::vector<int32_t> args = r.ints(call, slot::kCallArgs, "call args");
        if (tag == kKernelCall) {
          std::string op = index >= 0 && static_cast<size_t>(index) < ops.size() ? ops[index] : "?";
          bool copy = op.rfind("et_copy::_h2d_copy", 0) == 0 || op.rfind("et_copy::_d2h_copy", 0) == 0;
          note(args, "kernel " + op + (copy ? " (copies through the device allocator)" : " (runs on the host)"),
               copy);
        } else {
          std::string id = index >= 0 && static_cast<size_t>(index) < backends.size() ? backends[index] : "?";
          // whether the backend runs on the device depends on the arena's device type
          for (int32_t v : args) {
            for (int64_t m : arenas_of(v)) {
              auto it = found.find(m);
              if (it == found.end()) continue;
              bool on_device = is_device_backend(id, it->second.device_type);
              add_unique(on_device ? &it->second.device_users : &it->second.host_users,
                         "delegate " + id + (on_device ? " (runs on the device)" : " (runs on the host)"));
            }
          }
        }
      }
    }
    for (auto& [mem_id, a] : found) out->push_back(a);
  }
  if (!r.bad.empty()) {
    *why = r.bad;
    return false;
  }
  return true;
}

bool read_program_bytes(const char* path, std::vector<uint8_t>* bytes, std::string* why) {
  FILE* f = std::fopen(path, "rb");
  if (f == nullptr) {
    *why = std::string("cannot open ") + path;
    return false;
  }
  std::fseek(f, 0, SEEK_END);
  long file_size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  uint8_t head[32] = {};
  size_t got = std::fread(head, 1, sizeof head, f);
  uint64_t program_size = static_cast<uint64_t>(file_size);
  if (got >= 24 && std::memcmp(head + 8, "eh00", 4) == 0) {
    std::memcpy(&program_size, head + 16, 8);  // the extended header's program_size
  }
  // the flatbuffer is small unless a file keeps its constants inline; refuse what no program needs
  if (file_size < 8 || program_size > static_cast<uint64_t>(file_size) || program_size > (1ull << 31)) {
    std::fclose(f);
    *why = std::string(path) + ": the header's program size does not fit the file";
    return false;
  }
  bytes->assign(program_size, 0);
  std::fseek(f, 0, SEEK_SET);
  got = std::fread(bytes->data(), 1, program_size, f);
  std::fclose(f);
  if (got != program_size) {
    *why = std::string(path) + ": short read";
    return false;
  }
  return true;
}

}  // namespace pte_lab
