// The standalone runner links against older glibc symbol versions (x86-64 glibc only).
//
// Built here, a program binds to the newest version of each glibc symbol on this
// machine (dlopen@GLIBC_2.34 on glibc >= 2.34), so it would refuse to start
// where glibc is older, although ExecuTorch's wheel libraries ask for no more
// than GLIBC_2.27. Each source of the runner that calls these includes this
// header: the references bind to the versions every x86-64 glibc has.
// (portable_start.cpp does the same for the program's entry.)
#ifndef PTE_LAB_GLIBC_COMPAT_H
#define PTE_LAB_GLIBC_COMPAT_H

#if defined(__linux__)
#include <features.h>  // defines __GLIBC__ on glibc
#endif

#if defined(PTE_LAB_GLIBC_COMPAT) && defined(__x86_64__) && defined(__GLIBC__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
#endif

#endif  // PTE_LAB_GLIBC_COMPAT_H
