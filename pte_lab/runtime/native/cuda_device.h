// pte_lab's CUDA device: an ExecuTorch DeviceAllocator over the CUDA driver API, loaded at run time.
//
// No CUDA toolkit is needed to build it: the driver is opened with
// dlopen("libcuda.so.1") and the few entry points used are declared in
// cuda_device.cpp from NVIDIA's driver API documentation. Every allocation,
// free and copy lands in the device ledger (device_ledger.h), the one the
// emulated device writes.
#ifndef PTE_LAB_CUDA_DEVICE_H
#define PTE_LAB_CUDA_DEVICE_H

#include <stdint.h>

extern "C" {

// What the driver says about the opened device (valid after pte_lab_cuda_open).
struct PteLabCudaInfo {
  char name[256];
  int32_t driver_version;  // cuDriverGetVersion: 1000 * major + 10 * minor
  int32_t device_index;
  int32_t compute_major, compute_minor;
  int32_t managed_memory;            // CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
  int32_t concurrent_managed_access;  // needed to prefetch managed memory to the device
  int32_t pageable_memory_access;     // the device can address ordinary host memory (HMM/ATS)
  uint64_t total_bytes;
};

// How the next allocation is served (the loader says it per arena; unannounced ones are managed).
enum PteLabCudaMemory : int32_t {
  kCudaDeviceMemory = 0,   // cuMemAlloc: only device code and the allocator's copies may touch it
  kCudaManagedMemory = 1,  // cuMemAllocManaged, prefetched to the device: host code may touch it too
  kCudaManagedNotPrefetched = 2,  // (what an allocation got) managed, but the prefetch was refused: see last error
};

// Opens the driver and device `index` without creating a context (probe = 1) or with the device's
// primary context made current (probe = 0). 0 on success; otherwise why (one line) says what failed.
int32_t pte_lab_cuda_open(int32_t index, int32_t probe, char* why, uint64_t why_len);
void pte_lab_cuda_info(PteLabCudaInfo* out);
// Registers the CUDA allocator in ExecuTorch's registry: 0 ok, -1 another one is registered, -3 not open.
int32_t pte_lab_cuda_register();
void pte_lab_cuda_next_allocation(int32_t memory);
// The memory kind an outstanding allocation got (-1: not one of ours).
int32_t pte_lab_cuda_memory_of(const void* ptr);
// Free and total device memory as the driver reports them (cuMemGetInfo, after synchronizing).
int32_t pte_lab_cuda_mem_info(uint64_t* free_bytes, uint64_t* total_bytes);
// The driver's message for the last call that failed ("" if none).
const char* pte_lab_cuda_last_error();
}

#endif  // PTE_LAB_CUDA_DEVICE_H
