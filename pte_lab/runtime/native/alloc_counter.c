/* pte_lab's allocation counter: preloaded (LD_PRELOAD) into the isolated worker.
 *
 * It counts, exactly and per call, the memory a process takes outside any
 * ExecuTorch allocator:
 *   - the C heap: every malloc / calloc / realloc / memalign family call and
 *     every free, in usable bytes (malloc_usable_size), with a resettable peak;
 *   - mappings made through mmap / munmap, told apart as anonymous or
 *     file-backed (ExecuTorch's MmapDataLoader maps the .pte). How much of a
 *     file mapping is resident is the kernel's to say (/proc/self/smaps).
 *
 * The counted functions forward to glibc's own (__libc_malloc and friends), so
 * nothing changes but the counting. glibc's internal calls (malloc's own mmap
 * of large blocks, say) do not pass through here and are not counted twice.
 * Without glibc the file does not build, and pte_lab's host figures stay
 * approximate.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "pte_lab_counts.h"

#ifndef __GLIBC__
#error "pte_lab's allocation counter needs glibc"
#endif

extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

/* ------------------------------------------------------------------ heap */
static int64_t heap_live, heap_peak, heap_calls, heap_frees;

static void peak_update(int64_t* peak, int64_t now) {
  int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
  while (now > seen && !__atomic_compare_exchange_n(peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void* counted(void* p) {
  if (p) {
    int64_t n = (int64_t)malloc_usable_size(p);
    int64_t now = __atomic_add_fetch(&heap_live, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&heap_calls, 1, __ATOMIC_RELAXED);
    peak_update(&heap_peak, now);
  }
  return p;
}

static void uncount(void* p) {
  if (p) {
    __atomic_sub_fetch(&heap_live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
    __atomic_add_fetch(&heap_frees, 1, __ATOMIC_RELAXED);
  }
}

void* malloc(size_t n) { return counted(__libc_malloc(n)); }
void free(void* p) {
  uncount(p);
  __libc_free(p);
}
void* calloc(size_t a, size_t b) { return counted(__libc_calloc(a, b)); }
void* realloc(void* p, size_t n) {
  int64_t before = p ? (int64_t)malloc_usable_size(p) : 0;
  void* q = __libc_realloc(p, n);
  if (q || n == 0) { /* the old block is gone (moved, shrunk in place or freed) */
    __atomic_sub_fetch(&heap_live, before, __ATOMIC_RELAXED);
    if (q) counted(q);
  }
  return q;
}
void* memalign(size_t a, size_t n) { return counted(__libc_memalign(a, n)); }
void* aligned_alloc(size_t a, size_t n) { return counted(__libc_memalign(a, n)); }
void* valloc(size_t n) { return counted(__libc_memalign((size_t)sysconf(_SC_PAGESIZE), n)); }
void* pvalloc(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return counted(__libc_memalign(page, (n + page - 1) / page * page));
}
int posix_memalign(void** out, size_t a, size_t n) {
  if (a < sizeof(void*) || (a & (a - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = counted(p);
  return 0;
}

/* -------------------------------------------------------------- mappings */
#define MAX_REGIONS 65536
struct region {
  uintptr_t start, end;
  int file;
};
static struct region regions[MAX_REGIONS];
static int n_regions;
static char region_lock;
static int64_t mapped[2], mapped_peak[2], untracked;

static void lock(void) {
  while (__atomic_test_and_set(&region_lock, __ATOMIC_ACQUIRE)) {
  }
}
static void unlock(void) { __atomic_clear(&region_lock, __ATOMIC_RELEASE); }

static uintptr_t page_up(uintptr_t n) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  return (n + page - 1) / page * page;
}

/* Forget [start, end) from the table (caller holds the lock). */
static void forget(uintptr_t start, uintptr_t end) {
  for (int i = 0; i < n_regions; i++) {
    struct region* r = &regions[i];
    if (r->end <= start || r->start >= end) continue;
    uintptr_t lo = r->start > start ? r->start : start, hi = r->end < end ? r->end : end;
    mapped[r->file] -= (int64_t)(hi - lo);
    if (lo == r->start && hi == r->end) { /* whole region: swap-remove */
      regions[i--] = regions[--n_regions];
    } else if (lo == r->start) {
      r->start = hi;
    } else if (hi == r->end) {
      r->end = lo;
    } else if (n_regions < MAX_REGIONS) { /* a hole in the middle: split */
      regions[n_regions++] = (struct region){hi, r->end, r->file};
      r->end = lo;
    } else { /* table full: the right part is no longer tracked */
      mapped[r->file] -= (int64_t)(r->end - hi);
      untracked += (int64_t)(r->end - hi);
      r->end = lo;
    }
  }
}

static void remember(void* p, size_t len, int file) {
  uintptr_t start = (uintptr_t)p, end = start + page_up(len);
  lock();
  forget(start, end); /* MAP_FIXED over an older mapping replaces it */
  if (n_regions < MAX_REGIONS) {
    regions[n_regions++] = (struct region){start, end, file};
    mapped[file] += (int64_t)(end - start);
    if (mapped[file] > mapped_peak[file]) mapped_peak[file] = mapped[file];
  } else {
    untracked += (int64_t)(end - start);
  }
  unlock();
}

static void* raw_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return (void*)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  void* p = raw_mmap(addr, len, prot, flags, fd, off);
  if ((intptr_t)p < 0 && (intptr_t)p > -4096) {
    errno = -(int)(intptr_t)p;
    return MAP_FAILED;
  }
  remember(p, len, !(flags & MAP_ANONYMOUS) && fd >= 0);
  return p;
}
void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

int munmap(void* addr, size_t len) {
  long rc = syscall(SYS_munmap, addr, len);
  if (rc == 0) {
    lock();
    forget((uintptr_t)addr, (uintptr_t)addr + page_up(len));
    unlock();
  }
  return (int)rc;
}

/* ------------------------------------------------------------ reporting */
void pte_lab_counter_read(struct pte_lab_counts* out) {
  out->heap_live = __atomic_load_n(&heap_live, __ATOMIC_RELAXED);
  out->heap_peak = __atomic_load_n(&heap_peak, __ATOMIC_RELAXED);
  out->heap_calls = __atomic_load_n(&heap_calls, __ATOMIC_RELAXED);
  out->heap_frees = __atomic_load_n(&heap_frees, __ATOMIC_RELAXED);
  lock();
  out->anon_mapped = mapped[0];
  out->anon_peak = mapped_peak[0];
  out->file_mapped = mapped[1];
  out->file_peak = mapped_peak[1];
  out->untracked = untracked;
  unlock();
}

/* Peaks start again from what is live now (call before a step to get that step's peak). */
void pte_lab_counter_reset_peaks(void) {
  __atomic_store_n(&heap_peak, __atomic_load_n(&heap_live, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  lock();
  mapped_peak[0] = mapped[0];
  mapped_peak[1] = mapped[1];
  unlock();
}

/* Host bytes taken now: the heap live plus anonymous mappings (what a step's host figure counts). */
int64_t pte_lab_counter_host_bytes(void) {
  struct pte_lab_counts c;
  pte_lab_counter_read(&c);
  return c.heap_live + c.anon_mapped;
}

int32_t pte_lab_counter_version(void) { return 1; }
