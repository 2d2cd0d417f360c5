// The device ledger: one record per device allocator call, whichever allocator made it.
//
// The emulated device (emulated_device.cpp) and the CUDA device (cuda_device.cpp)
// both record here, so a run reads one ledger whatever backend served it. The
// ledger itself lives in emulated_device.cpp; Python mirrors the record's layout
// (pte_lab.runtime.native.Event) and checks its size against pte_lab_event_size().
#ifndef PTE_LAB_DEVICE_LEDGER_H
#define PTE_LAB_DEVICE_LEDGER_H

#include <stdint.h>

enum PteLabEventKind : int32_t {
  kAllocate = 0,
  kFree = 1,
  kHostToDevice = 2,
  kDeviceToHost = 3,
  kRefused = 4,  // an allocation or copy the allocator refused (bytes: what was asked)
};

struct PteLabEvent {
  int32_t kind;
  int32_t device_type;
  int32_t device_index;
  int32_t reserved;
  uint64_t bytes;
  uint64_t alignment;
  uint64_t address;
  int64_t time_ns;
};

extern "C" {
// Append one record (thread-safe).
void pte_lab_ledger_record(int32_t kind, int32_t device_type, int32_t device_index, uint64_t bytes,
                           uint64_t alignment, const void* address);
// Records so far, and a copy of up to max of them from position start (returns how many).
uint64_t pte_lab_event_count();
uint64_t pte_lab_events(uint64_t start, PteLabEvent* out, uint64_t max);
}

#endif  // PTE_LAB_DEVICE_LEDGER_H
