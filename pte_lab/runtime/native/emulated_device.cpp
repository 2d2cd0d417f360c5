// pte_lab's emulated device: an ExecuTorch DeviceAllocator served from host memory.
//
// Built on first use against the headers and libexecutorch.so of the installed
// executorch wheel, and loaded with ctypes. Because ExecuTorch's Python
// extension links libexecutorch.so dynamically, this library shares its
// DeviceAllocatorRegistry: registering here makes Runtime.load_program place
// device-planned arenas through this allocator.
//
// Every call is recorded in the device ledger (device_ledger.h: allocate, free,
// host->device and device->host copies: bytes, alignment, device index, time),
// which Python reads and which the CUDA device (cuda_device.cpp) records into too.
// The registry keeps a raw pointer, so allocators live until the process ends.
// A second registration for the same device type aborts the process: the
// C entry point below asks the registry first and refuses instead.

#include <executorch/runtime/core/device_allocator.h>

#include "device_ledger.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;
using executorch::runtime::etensor::kNumDeviceTypes;

using Event = PteLabEvent;

std::mutex g_mutex;
std::vector<Event> g_events;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(int32_t kind, DeviceType type, DeviceIndex index, uint64_t bytes, uint64_t alignment,
            const void* address) {
  pte_lab_ledger_record(kind, static_cast<int32_t>(type), static_cast<int32_t>(index), bytes, alignment, address);
}

// The device's bytes are host memory, but not the host's: on glibc they come
// from malloc's own entry points, which pte_lab's allocation counter (preloaded
// into the isolated worker) does not see, so they are never counted as host bytes.
#if defined(__GLIBC__)
extern "C" void* __libc_memalign(size_t, size_t);
extern "C" void __libc_free(void*);
void* device_memory(size_t align, size_t n) { return __libc_memalign(align, n); }
void release_device_memory(void* p) { __libc_free(p); }
#else
void* device_memory(size_t align, size_t n) {
  void* p = nullptr;
  return posix_memalign(&p, align, n) == 0 ? p : nullptr;
}
void release_device_memory(void* p) { std::free(p); }
#endif

class EmulatedDeviceAllocator final : public DeviceAllocator {
 public:
  explicit EmulatedDeviceAllocator(DeviceType type) : type_(type) {}

  Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment) override {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      record(kRefused, type_, index, nbytes, alignment, nullptr);
      return Error::InvalidArgument;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (capacity_ != 0 && outstanding_ + nbytes > capacity_) {
        record(kRefused, type_, index, nbytes, alignment, nullptr);
        return Error::MemoryAllocationFailed;
      }
    }
    size_t align = alignment < sizeof(void*) ? sizeof(void*) : alignment;
    void* ptr = nullptr;
    if ((ptr = device_memory(align, nbytes == 0 ? 1 : nbytes)) == nullptr) {
      record(kRefused, type_, index, nbytes, alignment, nullptr);
      return Error::MemoryAllocationFailed;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[ptr] = nbytes;
      outstanding_ += nbytes;
    }
    record(kAllocate, type_, index, nbytes, alignment, ptr);
    return ptr;
  }

  void deallocate(void* ptr, DeviceIndex index) override {
    if (ptr == nullptr) {
      return;
    }
    uint64_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        bytes = it->second;
        outstanding_ -= bytes;
        sizes_.erase(it);
      }
    }
    record(kFree, type_, index, bytes, 0, ptr);
    release_device_memory(ptr);
  }

  Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    std::memcpy(dst, src, nbytes);
    record(kHostToDevice, type_, index, nbytes, 0, dst);
    return Error::Ok;
  }

  Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    std::memcpy(dst, src, nbytes);
    record(kDeviceToHost, type_, index, nbytes, 0, src);
    return Error::Ok;
  }

  DeviceType device_type() const override { return type_; }

  uint64_t outstanding() {
    std::lock_guard<std::mutex> lock(mutex_);
    return outstanding_;
  }

  void set_capacity(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = bytes;
  }

  uint64_t capacity() {
    std::lock_guard<std::mutex> lock(mutex_);
    return capacity_;
  }

 private:
  DeviceType type_;
  std::mutex mutex_;
  std::unordered_map<void*, uint64_t> sizes_;
  uint64_t outstanding_ = 0;
  uint64_t capacity_ = 0;  // 0: unlimited
};

EmulatedDeviceAllocator* g_allocators[kNumDeviceTypes] = {};

bool valid_type(int32_t type) { return type > 0 && static_cast<size_t>(type) < kNumDeviceTypes; }

}  // namespace

extern "C" {

void pte_lab_ledger_record(int32_t kind, int32_t device_type, int32_t device_index, uint64_t bytes,
                           uint64_t alignment, const void* address) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.push_back(Event{kind, device_type, device_index, 0, bytes, alignment,
                           reinterpret_cast<uint64_t>(address), now_ns()});
}

// Size of one ledger record, so Python can check its struct layout.
int32_t pte_lab_event_size() { return static_cast<int32_t>(sizeof(Event)); }

int32_t pte_lab_num_device_types() { return static_cast<int32_t>(kNumDeviceTypes); }

// 1 if any allocator (ours or another) is registered for the device type.
int32_t pte_lab_has_allocator(int32_t type) {
  if (type < 0 || static_cast<size_t>(type) >= kNumDeviceTypes) return 0;
  return executorch::runtime::get_device_allocator(static_cast<DeviceType>(type)) != nullptr;
}

// 1 if the registered allocator for the type is this library's emulated one.
int32_t pte_lab_is_emulated(int32_t type) {
  if (!valid_type(type) || g_allocators[type] == nullptr) return 0;
  return executorch::runtime::get_device_allocator(static_cast<DeviceType>(type)) == g_allocators[type];
}

// 0: registered; 1: already emulated here (nothing done); -1: another allocator
// is registered (registering again would abort the process); -2: invalid type.
int32_t pte_lab_register(int32_t type) {
  if (!valid_type(type)) return -2;
  if (pte_lab_is_emulated(type)) return 1;
  if (pte_lab_has_allocator(type)) return -1;
  g_allocators[type] = new EmulatedDeviceAllocator(static_cast<DeviceType>(type));  // lives forever
  executorch::runtime::register_device_allocator(g_allocators[type]);
  return 0;
}

uint64_t pte_lab_outstanding(int32_t type) {
  return valid_type(type) && g_allocators[type] ? g_allocators[type]->outstanding() : 0;
}

void pte_lab_set_capacity(int32_t type, uint64_t bytes) {
  if (valid_type(type) && g_allocators[type]) g_allocators[type]->set_capacity(bytes);
}

uint64_t pte_lab_capacity(int32_t type) {
  return valid_type(type) && g_allocators[type] ? g_allocators[type]->capacity() : 0;
}

uint64_t pte_lab_event_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_events.size();
}

// Copy up to max events starting at start into out; returns how many were copied.
uint64_t pte_lab_events(uint64_t start, Event* out, uint64_t max) {
  std::lock_guard<std::mutex> lock(g_mutex);
  uint64_t n = 0;
  for (uint64_t i = start; i < g_events.size() && n < max; ++i, ++n) out[n] = g_events[i];
  return n;
}

}  // extern "C"
