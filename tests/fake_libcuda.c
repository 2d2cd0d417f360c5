/* A test double of the CUDA driver (libcuda.so.1) for machines without a GPU.
 *
 * It exports the driver entry points pte_lab's CUDA device (runtime/native/cuda_device.cpp)
 * calls, with the driver's signatures, and serves them from host memory so the CUDA code
 * path runs end to end in tests. It keeps the rules that matter to the measurement:
 *   - cuMemAlloc memory is not host memory: the pointer handed out is mapped PROT_NONE, so
 *     host code touching it faults (the driver's copies go through a second, writable view);
 *   - cuMemAllocManaged memory is readable and writable from the host;
 *   - cuMemcpyHtoD / DtoH refuse a "device" pointer that no allocation of theirs holds
 *     (CUDA_ERROR_INVALID_VALUE), as the driver refuses ordinary pageable host memory;
 *   - cuMemGetInfo reports 1 GiB total, allocations rounded up to 2 MiB pages.
 * FAKE_CUDA_NO_DEVICE=1 makes cuInit fail with CUDA_ERROR_NO_DEVICE (a driver, no GPU).
 * Built by tests/test_bundle.py with the system C compiler; it is never part of pte_lab.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { int type; int id; } CUmemLocation;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NO_DEVICE = 100 };
#define TOTAL (1ull << 30)
#define PAGE (2ull << 20)
#define MAX 256

struct alloc {
  uintptr_t ptr;   /* what the caller sees */
  char* shadow;    /* the writable view of device memory (NULL: managed) */
  size_t size, mapped;
};
static struct alloc allocs[MAX];
static unsigned long long used;
static int ctx_dummy;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static struct alloc* find(uintptr_t p, size_t n) {
  for (int i = 0; i < MAX; i++) {
    struct alloc* a = &allocs[i];
    if (a->ptr && p >= a->ptr && p + n <= a->ptr + a->size) return a;
  }
  return NULL;
}

static struct alloc* slot(void) {
  for (int i = 0; i < MAX; i++)
    if (!allocs[i].ptr) return &allocs[i];
  return NULL;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  const char* e = getenv("FAKE_CUDA_NO_DEVICE");
  return e && *e == '1' ? NO_DEVICE : OK;
}
CUresult cuDriverGetVersion(int* v) { *v = 12080; return OK; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return OK; }
CUresult cuDeviceGet(CUdevice* d, int ordinal) { if (ordinal != 0) return INVALID_VALUE; *d = 0; return OK; }
CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  (void)d;
  strncpy(name, "pte_lab test double of the CUDA driver", (size_t)len);
  return OK;
}
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
  (void)d;
  switch (attr) {
    case 75: *v = 9; break;  /* compute capability 9.0 */
    case 76: *v = 0; break;
    case 83: *v = 1; break;  /* managed memory */
    case 89: *v = 1; break;  /* concurrent managed access */
    default: *v = 0;
  }
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) { (void)d; *bytes = TOTAL; return OK; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, CUdevice d) { (void)d; *ctx = &ctx_dummy; return OK; }
CUresult cuCtxSetCurrent(void* ctx) { return ctx == &ctx_dummy ? OK : INVALID_VALUE; }
CUresult cuCtxSynchronize(void) { return OK; }

CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t n) {
  struct alloc* a = slot();
  size_t mapped = round_up(n ? n : 1, (size_t)sysconf(_SC_PAGESIZE));
  if (!a || used + round_up(n, PAGE) > TOTAL) return OUT_OF_MEMORY;
  int fd = memfd_create("fake-cuda-device", 0);
  if (fd < 0 || ftruncate(fd, (off_t)mapped) != 0) return OUT_OF_MEMORY;
  void* device = mmap(NULL, mapped, PROT_NONE, MAP_SHARED, fd, 0);
  void* shadow = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (device == MAP_FAILED || shadow == MAP_FAILED) return OUT_OF_MEMORY;
  *a = (struct alloc){(uintptr_t)device, shadow, n, mapped};
  used += round_up(n, PAGE);
  *out = (CUdeviceptr)(uintptr_t)device;
  return OK;
}
CUresult cuMemAllocManaged(CUdeviceptr* out, size_t n, unsigned flags) {
  (void)flags;
  struct alloc* a = slot();
  size_t mapped = round_up(n ? n : 1, (size_t)sysconf(_SC_PAGESIZE));
  if (!a || used + round_up(n, PAGE) > TOTAL) return OUT_OF_MEMORY;
  void* p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return OUT_OF_MEMORY;
  *a = (struct alloc){(uintptr_t)p, NULL, n, mapped};
  used += round_up(n, PAGE);
  *out = (CUdeviceptr)(uintptr_t)p;
  return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  struct alloc* a = find((uintptr_t)p, 0);
  if (!a || a->ptr != (uintptr_t)p) return INVALID_VALUE;
  munmap((void*)a->ptr, a->mapped);
  if (a->shadow) munmap(a->shadow, a->mapped);
  used -= round_up(a->size, PAGE);
  memset(a, 0, sizeof *a);
  return OK;
}
static char* host_view(uintptr_t p, size_t n) {
  struct alloc* a = find(p, n);
  if (!a) return NULL;
  return a->shadow ? a->shadow + (p - a->ptr) : (char*)p;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  char* d = host_view((uintptr_t)dst, n);
  if (!d) return INVALID_VALUE;
  memcpy(d, src, n);
  return OK;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  char* s = host_view((uintptr_t)src, n);
  if (!s) return INVALID_VALUE;
  memcpy(dst, s, n);
  return OK;
}
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  *free_bytes = TOTAL - used;
  *total = TOTAL;
  return OK;
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, void* stream) {
  (void)flags; (void)stream;
  struct alloc* a = find((uintptr_t)p, n);
  return a && !a->shadow && loc.type == 1 && loc.id == 0 ? OK : INVALID_VALUE;
}
CUresult cuGetErrorName(CUresult rc, const char** s) {
  *s = rc == OK ? "CUDA_SUCCESS" : rc == INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
     : rc == OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : rc == NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return OK;
}
CUresult cuGetErrorString(CUresult rc, const char** s) {
  *s = rc == INVALID_VALUE ? "invalid argument" : rc == OUT_OF_MEMORY ? "out of memory"
     : rc == NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
  return OK;
}
