// Who touches each device arena of a program: read from the .pte's flatbuffer.
//
// A CUDA arena can be plain device memory (cuMemAlloc) only when nothing but
// device code reads and writes it: a delegate that runs on the device, or
// ExecuTorch's host<->device copy kernels (et_copy::_h2d_copy / _d2h_copy),
// which go through the device allocator's copy functions. Anything else that
// names one of its tensors runs on the host — a host delegate such as
// XNNPACK (the example device program's forward2), a portable kernel, the
// method's caller setting an input or reading an output — and needs memory
// both sides can address (managed memory).
//
// The reader follows the offsets of ExecuTorch's schema (exir/_serialize/
// program.fbs) with every read bounds-checked; pte_lab.format is its Python
// counterpart. It runs after ExecuTorch's own verifier accepted the file.
#ifndef PTE_LAB_ARENA_USERS_H
#define PTE_LAB_ARENA_USERS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pte_lab {

struct ArenaUsers {
  std::string method;
  int64_t mem_id = 0;       // the file's numbering (1..n); the runtime's buffer index is mem_id - 1
  int32_t device_type = 0;  // ExecuTorch's DeviceType (CPU 0, CUDA 1)
  int32_t device_index = 0;
  std::vector<std::string> host_users;    // e.g. "delegate XnnpackBackend", "kernel aten::add.out", "method input 0"
  std::vector<std::string> device_users;  // e.g. "kernel et_copy::_h2d_copy.out (a copy through the allocator)"
  bool host_touches() const { return !host_users.empty(); }
};

// Backends whose delegates run on the device they are given (their arenas need not be host-visible).
bool is_device_backend(const std::string& backend_id, int32_t device_type);

// Every device arena (non-CPU entry of non_const_buffer_device) of every method, with its users.
// Returns false and says why when the flatbuffer cannot be read.
bool read_arena_users(const uint8_t* data, size_t size, std::vector<ArenaUsers>* out, std::string* why);

// Reads the program part of a .pte file (header + flatbuffer, not the segments) into bytes.
bool read_program_bytes(const char* path, std::vector<uint8_t>* bytes, std::string* why);

}  // namespace pte_lab

#endif  // PTE_LAB_ARENA_USERS_H
