// pte_lab's CUDA device (see cuda_device.h): ExecuTorch's DeviceAllocator over the CUDA driver API.
//
// Two kinds of memory, chosen per allocation by the caller (the loader knows
// which arena it is allocating, and reads from the program who touches it):
//   - device memory (cuMemAlloc) for arenas only device code touches;
//   - managed memory (cuMemAllocManaged, prefetched to the device with
//     cuMemPrefetchAsync) for arenas host code reads and writes, such as the
//     arena of a delegate that runs on the host (XNNPACK) but was given a
//     device with a target_device compile spec.
// Copies use cuMemcpyHtoD / cuMemcpyDtoH (synchronous for pageable host memory).
//
// The driver's types and entry points are declared here from NVIDIA's public
// CUDA driver API reference; the versioned names (_v2) are the ones the
// driver exports for the 64-bit signatures used.

#include "glibc_compat.h"  // first: it binds the dl* calls below to old glibc versions

#include "cuda_device.h"

#include <executorch/runtime/core/device_allocator.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "device_ledger.h"

namespace {

// ------------------------------------------------------------ the driver API
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;
};

constexpr CUresult CUDA_SUCCESS = 0;
constexpr unsigned CU_MEM_ATTACH_GLOBAL = 0x1;
constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 0x1;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83;
constexpr int CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88;
constexpr int CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89;

struct Driver {
  void* handle = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;  // cuDeviceTotalMem_v2
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;                  // cuMemAlloc_v2
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, size_t, unsigned) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                            // cuMemFree_v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;    // cuMemcpyHtoD_v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;          // cuMemcpyDtoH_v2
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;                    // cuMemGetInfo_v2
  // CUDA >= 12.2 exports the location form; older drivers only the device form
  CUresult (*cuMemPrefetchAsync_v2)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream) = nullptr;
  CUresult (*cuMemPrefetchAsync)(CUdeviceptr, size_t, CUdevice, CUstream) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
};

Driver g_cu;
std::mutex g_mutex;
bool g_opened = false, g_context = false;
CUdevice g_device = 0;
CUcontext g_ctx = nullptr;
PteLabCudaInfo g_info{};
std::string g_last_error;
int32_t g_next = kCudaManagedMemory;

std::string describe(const char* call, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_cu.cuGetErrorName) g_cu.cuGetErrorName(rc, &name);
  if (g_cu.cuGetErrorString) g_cu.cuGetErrorString(rc, &text);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s failed: %s (%d)%s%s", call, name ? name : "CUDA error", rc, text ? ": " : "",
                text ? text : "");
  return buf;
}

template <typename F>
bool bind(F* fn, const char* symbol, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(g_cu.handle, symbol));
  if (*fn == nullptr && missing->empty()) *missing = symbol;
  return *fn != nullptr;
}

bool load_driver(std::string* why) {
  if (g_cu.handle != nullptr) return true;
  g_cu.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (g_cu.handle == nullptr) {
    const char* e = dlerror();
    *why = std::string("no CUDA driver: ") + (e ? e : "dlopen(libcuda.so.1) failed");
    return false;
  }
  std::string missing;
  bind(&g_cu.cuInit, "cuInit", &missing);
  bind(&g_cu.cuDriverGetVersion, "cuDriverGetVersion", &missing);
  bind(&g_cu.cuDeviceGetCount, "cuDeviceGetCount", &missing);
  bind(&g_cu.cuDeviceGet, "cuDeviceGet", &missing);
  bind(&g_cu.cuDeviceGetName, "cuDeviceGetName", &missing);
  bind(&g_cu.cuDeviceGetAttribute, "cuDeviceGetAttribute", &missing);
  bind(&g_cu.cuDeviceTotalMem, "cuDeviceTotalMem_v2", &missing);
  bind(&g_cu.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &missing);
  bind(&g_cu.cuCtxSetCurrent, "cuCtxSetCurrent", &missing);
  bind(&g_cu.cuCtxSynchronize, "cuCtxSynchronize", &missing);
  bind(&g_cu.cuMemAlloc, "cuMemAlloc_v2", &missing);
  bind(&g_cu.cuMemAllocManaged, "cuMemAllocManaged", &missing);
  bind(&g_cu.cuMemFree, "cuMemFree_v2", &missing);
  bind(&g_cu.cuMemcpyHtoD, "cuMemcpyHtoD_v2", &missing);
  bind(&g_cu.cuMemcpyDtoH, "cuMemcpyDtoH_v2", &missing);
  bind(&g_cu.cuMemGetInfo, "cuMemGetInfo_v2", &missing);
  std::string optional;  // either prefetch form will do; error texts are a courtesy
  bind(&g_cu.cuMemPrefetchAsync_v2, "cuMemPrefetchAsync_v2", &optional);
  bind(&g_cu.cuMemPrefetchAsync, "cuMemPrefetchAsync", &optional);
  bind(&g_cu.cuGetErrorName, "cuGetErrorName", &optional);
  bind(&g_cu.cuGetErrorString, "cuGetErrorString", &optional);
  if (!missing.empty()) {
    *why = "the CUDA driver (libcuda.so.1) lacks " + missing;
    dlclose(g_cu.handle);
    g_cu = Driver{};
    return false;
  }
  return true;
}

using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::Result;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

// Makes the context current on the calling thread (ExecuTorch may call from any thread).
bool current(std::string* why) {
  CUresult rc = g_cu.cuCtxSetCurrent(g_ctx);
  if (rc != CUDA_SUCCESS) {
    *why = describe("cuCtxSetCurrent", rc);
    return false;
  }
  return true;
}

class CudaDeviceAllocator final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment) override {
    std::lock_guard<std::mutex> lock(g_mutex);
    int32_t memory = g_next;
    g_next = kCudaManagedMemory;  // an announcement covers one allocation
    // the driver aligns every allocation to at least 256 bytes
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 256 || !same_device(index)) {
      g_last_error = "refused: alignment " + std::to_string(alignment) + " or device index " +
                     std::to_string(index) + " (cuda:" + std::to_string(g_info.device_index) + " is open)";
      pte_lab_ledger_record(kRefused, 1, index, nbytes, alignment, nullptr);
      return Error::InvalidArgument;
    }
    std::string why;
    CUdeviceptr p = 0;
    CUresult rc = CUDA_SUCCESS;
    if (!current(&why)) {
      rc = -1;
    } else if (memory == kCudaDeviceMemory) {
      rc = g_cu.cuMemAlloc(&p, nbytes ? nbytes : 1);
      if (rc != CUDA_SUCCESS) why = describe("cuMemAlloc", rc);
    } else {
      rc = g_cu.cuMemAllocManaged(&p, nbytes ? nbytes : 1, CU_MEM_ATTACH_GLOBAL);
      if (rc != CUDA_SUCCESS) {
        why = describe("cuMemAllocManaged", rc);
      } else if (!prefetch(p, nbytes ? nbytes : 1, &why)) {
        g_last_error = why;  // the memory is usable: its pages are populated where they are first touched
        memory = kCudaManagedNotPrefetched;
      }
    }
    if (rc != CUDA_SUCCESS) {
      g_last_error = why;
      pte_lab_ledger_record(kRefused, 1, index, nbytes, alignment, nullptr);
      return Error::MemoryAllocationFailed;
    }
    void* ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
    sizes_[ptr] = {nbytes, memory};
    pte_lab_ledger_record(kAllocate, 1, index, nbytes, alignment, ptr);
    return ptr;
  }

  void deallocate(void* ptr, DeviceIndex index) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    uint64_t bytes = 0;
    auto it = sizes_.find(ptr);
    if (it != sizes_.end()) {
      bytes = it->second.first;
      sizes_.erase(it);
    }
    std::string why;
    if (current(&why)) {
      CUresult rc = g_cu.cuMemFree(device_ptr(ptr));
      if (rc != CUDA_SUCCESS) g_last_error = describe("cuMemFree", rc);
    } else {
      g_last_error = why;
    }
    pte_lab_ledger_record(kFree, 1, index, bytes, 0, ptr);
  }

  Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    return copy(kHostToDevice, "cuMemcpyHtoD", dst, nbytes, index,
                [&] { return g_cu.cuMemcpyHtoD(device_ptr(dst), src, nbytes); });
  }

  Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex index) override {
    return copy(kDeviceToHost, "cuMemcpyDtoH", src, nbytes, index,
                [&] { return g_cu.cuMemcpyDtoH(dst, device_ptr(src), nbytes); });
  }

  DeviceType device_type() const override { return DeviceType::CUDA; }

  int32_t memory_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = sizes_.find(const_cast<void*>(ptr));
    return it == sizes_.end() ? -1 : it->second.second;
  }

 private:
  static CUdeviceptr device_ptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

  // One copy through the driver, in the ledger as `kind` (device: the device side's address), or refused.
  template <typename Copy>
  static Error copy(int32_t kind, const char* call, const void* device, size_t nbytes, DeviceIndex index, Copy&& fn) {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::string why;
    CUresult rc = current(&why) ? fn() : -1;
    if (rc != CUDA_SUCCESS) {
      g_last_error = why.empty() ? describe(call, rc) : why;
      pte_lab_ledger_record(kRefused, 1, index, nbytes, 0, device);
      return Error::Internal;
    }
    pte_lab_ledger_record(kind, 1, index, nbytes, 0, device);
    return Error::Ok;
  }

  // -1 is the CUDA allocator convention for "the current device" (ExecuTorch's ATen-mode copies use it)
  static bool same_device(DeviceIndex index) { return index == -1 || index == g_info.device_index; }

  static bool prefetch(CUdeviceptr p, size_t n, std::string* why) {
    if (!g_info.concurrent_managed_access) {
      *why = "managed memory not prefetched: the device lacks concurrent managed access";
      return false;
    }
    CUresult rc;
    if (g_cu.cuMemPrefetchAsync_v2 != nullptr) {
      rc = g_cu.cuMemPrefetchAsync_v2(p, n, CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, g_device}, 0, nullptr);
    } else if (g_cu.cuMemPrefetchAsync != nullptr) {
      rc = g_cu.cuMemPrefetchAsync(p, n, g_device, nullptr);
    } else {
      *why = "managed memory not prefetched: the driver exports no cuMemPrefetchAsync";
      return false;
    }
    if (rc == CUDA_SUCCESS) rc = g_cu.cuCtxSynchronize();
    if (rc != CUDA_SUCCESS) {
      *why = describe("cuMemPrefetchAsync", rc);
      return false;
    }
    return true;
  }

  std::unordered_map<void*, std::pair<uint64_t, int32_t>> sizes_;
};

CudaDeviceAllocator* g_allocator = nullptr;

}  // namespace

extern "C" {

int32_t pte_lab_cuda_open(int32_t index, int32_t probe, char* why, uint64_t why_len) {
  std::string reason;
  auto fail = [&](const std::string& r) {
    if (why != nullptr && why_len > 0) std::snprintf(why, why_len, "%s", r.c_str());
    return 1;
  };
  if (!load_driver(&reason)) return fail(reason);
  if (!g_opened) {
    CUresult rc = g_cu.cuInit(0);
    if (rc != CUDA_SUCCESS) return fail(describe("cuInit", rc));
    int count = 0;
    rc = g_cu.cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) return fail(describe("cuDeviceGetCount", rc));
    if (index < 0 || index >= count) {
      return fail("the driver sees " + std::to_string(count) + " CUDA device(s); cuda:" + std::to_string(index) +
                  " is not one of them");
    }
    rc = g_cu.cuDeviceGet(&g_device, index);
    if (rc != CUDA_SUCCESS) return fail(describe("cuDeviceGet", rc));
    PteLabCudaInfo info{};
    info.device_index = index;
    g_cu.cuDriverGetVersion(&info.driver_version);
    if (g_cu.cuDeviceGetName(info.name, sizeof info.name - 1, g_device) != CUDA_SUCCESS) {
      std::snprintf(info.name, sizeof info.name, "cuda:%d", index);
    }
    g_cu.cuDeviceGetAttribute(&info.compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g_device);
    g_cu.cuDeviceGetAttribute(&info.compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g_device);
    g_cu.cuDeviceGetAttribute(&info.managed_memory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, g_device);
    g_cu.cuDeviceGetAttribute(&info.concurrent_managed_access, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                              g_device);
    g_cu.cuDeviceGetAttribute(&info.pageable_memory_access, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, g_device);
    size_t total = 0;
    if (g_cu.cuDeviceTotalMem(&total, g_device) == CUDA_SUCCESS) info.total_bytes = total;
    g_info = info;
    g_opened = true;
  } else if (index != g_info.device_index) {
    return fail("cuda:" + std::to_string(g_info.device_index) + " is already open");
  }
  if (!probe && !g_context) {
    CUresult rc = g_cu.cuDevicePrimaryCtxRetain(&g_ctx, g_device);
    if (rc != CUDA_SUCCESS) return fail(describe("cuDevicePrimaryCtxRetain", rc));
    rc = g_cu.cuCtxSetCurrent(g_ctx);
    if (rc != CUDA_SUCCESS) return fail(describe("cuCtxSetCurrent", rc));
    g_context = true;
  }
  return 0;
}

void pte_lab_cuda_info(PteLabCudaInfo* out) { *out = g_info; }

int32_t pte_lab_cuda_register() {
  if (!g_context) return -3;
  if (g_allocator != nullptr &&
      executorch::runtime::get_device_allocator(DeviceType::CUDA) == g_allocator) {
    return 0;
  }
  if (executorch::runtime::get_device_allocator(DeviceType::CUDA) != nullptr) return -1;  // a second one aborts
  g_allocator = new CudaDeviceAllocator();  // the registry keeps a raw pointer: it lives forever
  executorch::runtime::register_device_allocator(g_allocator);
  return 0;
}

void pte_lab_cuda_next_allocation(int32_t memory) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_next = memory == kCudaDeviceMemory ? kCudaDeviceMemory : kCudaManagedMemory;
}

int32_t pte_lab_cuda_memory_of(const void* ptr) { return g_allocator ? g_allocator->memory_of(ptr) : -1; }

int32_t pte_lab_cuda_mem_info(uint64_t* free_bytes, uint64_t* total_bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_context) return -3;
  std::string why;
  if (!current(&why)) return -1;
  if (g_cu.cuCtxSynchronize() != CUDA_SUCCESS) return -1;
  size_t f = 0, t = 0;
  CUresult rc = g_cu.cuMemGetInfo(&f, &t);
  if (rc != CUDA_SUCCESS) {
    g_last_error = describe("cuMemGetInfo", rc);
    return -1;
  }
  *free_bytes = f;
  *total_bytes = t;
  return 0;
}

const char* pte_lab_cuda_last_error() { return g_last_error.c_str(); }

}  // extern "C"
