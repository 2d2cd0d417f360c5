/* The allocation counter's record: one home for its layout.
 *
 * alloc_counter.c fills it, the sizing runner (sizing.cpp) reads it around
 * each step, and Python (pte_lab.runtime.memory.Counts) builds its ctypes
 * mirror from the field list below, read from this file. Every field is a
 * signed 64-bit count of bytes or calls.
 */
#ifndef PTE_LAB_COUNTS_H
#define PTE_LAB_COUNTS_H

#include <stdint.h>

/* heap: bytes live now, their peak since the last reset, malloc-family calls, frees;
 * mappings (mmap outside malloc): anonymous bytes now and their peak, file-backed bytes now and their
 * peak; untracked: bytes mapped while the counter's region table was full (not in the figures). */
#define PTE_LAB_COUNTS_FIELDS(X) \
  X(heap_live) X(heap_peak) X(heap_calls) X(heap_frees) \
  X(anon_mapped) X(anon_peak) X(file_mapped) X(file_peak) X(untracked)

#define PTE_LAB_COUNTS_FIELD(name) int64_t name;
struct pte_lab_counts {
  PTE_LAB_COUNTS_FIELDS(PTE_LAB_COUNTS_FIELD)
};
#undef PTE_LAB_COUNTS_FIELD

#endif /* PTE_LAB_COUNTS_H */
