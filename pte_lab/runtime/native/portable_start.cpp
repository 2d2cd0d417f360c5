// The standalone runner's entry, bound to the oldest __libc_start_main (x86-64 glibc only).
//
// glibc 2.34 moved the program's constructors out of the startup object: a
// program linked on glibc >= 2.34 calls __libc_start_main@GLIBC_2.34 with no
// init function and refuses to start on an older glibc. The link wraps that
// call (-Wl,--wrap=__libc_start_main) to come here, which calls the version
// every x86-64 glibc has, GLIBC_2.2.5, with an init function that runs the
// program's constructors (_init, then .init_array) as older startup code did.
// glibc >= 2.34 runs a given init function instead of its own: they run once.
// DT_PREINIT_ARRAY is the dynamic loader's to run, on every version.

#if defined(__linux__)
#include <features.h>  // defines __GLIBC__ on glibc
#endif

#if defined(PTE_LAB_GLIBC_COMPAT) && defined(__x86_64__) && defined(__GLIBC__)

extern "C" {

using InitFn = void (*)(int, char**, char**);
using MainFn = int (*)(int, char**, char**);

extern InitFn __init_array_start[];  // provided by the linker for an executable
extern InitFn __init_array_end[];
void _init();  // crti.o

int pte_lab_libc_start_main(MainFn main, int argc, char** argv, InitFn init, void (*fini)(),
                            void (*rtld_fini)(), void* stack_end);
__asm__(".symver pte_lab_libc_start_main,__libc_start_main@GLIBC_2.2.5");

static void run_constructors(int argc, char** argv, char** envp) {
  _init();
  for (InitFn* f = __init_array_start; f < __init_array_end; ++f) (*f)(argc, argv, envp);
}

int __wrap___libc_start_main(MainFn main, int argc, char** argv, InitFn init, void (*fini)(),
                             void (*rtld_fini)(), void* stack_end) {
  return pte_lab_libc_start_main(main, argc, argv, init != nullptr ? init : run_constructors, fini, rtld_fini,
                                 stack_end);
}

// libstdc++'s headers read glibc >= 2.32's __libc_single_threaded to skip atomics in a
// single-threaded process; this definition says "not single-threaded": always atomic, always right.
char __libc_single_threaded = 0;

}  // extern "C"

#endif
