/* Minimal startup for QEMU's mps3-an547 (Cortex-M55, SSE-300), written for pte_lab's bare-metal runner.
 *
 * - vector table (.vectors, placed at 0x00000000 = ITCM by link.ld; QEMU reads SP and PC from there),
 * - Reset_Handler: enables the FPU/MVE (CPACR CP10/CP11: the code is built -mfloat-abi=hard), copies .data
 *   from its load address, zeroes .bss (both the DTCM one and the DDR one), opens newlib's semihosting
 *   handles (rdimon), runs the static constructors (ExecuTorch's kernel registrations are static
 *   initialisers) and calls main,
 * - exit through semihosting SYS_EXIT_EXTENDED, so that qemu-system-arm's own exit status is main's.
 * - every fault prints its name and the stacked PC through semihosting and exits with status 3.
 *
 * Link with -nostartfiles --specs=rdimon.specs (newlib + rdimon's semihosting syscalls, none of its crt0).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern uint32_t __stack_top;
extern uint32_t __data_load, __data_start, __data_end;
extern uint32_t __bss_start__, __bss_end__;
extern uint32_t __ddr_bss_start, __ddr_bss_end;

extern int main(void);
extern void __libc_init_array(void);
extern void initialise_monitor_handles(void);

/* newlib's __libc_init_array calls _init (crti.o, not linked with -nostartfiles) */
void _init(void) {}
void _fini(void) {}

static int semihost(int op, void *arg) {
  register int r0 __asm__("r0") = op;
  register void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

__attribute__((noreturn)) void pte_lab_semihost_exit(int code) {
  fflush(stdout);
  fflush(stderr);
  uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, (uint32_t)code};
  semihost(0x20 /* SYS_EXIT_EXTENDED */, block);
  semihost(0x18 /* SYS_EXIT (status lost) */, (void *)0x20026u);
  for (;;) {
  }
}

/* runs only once the FPU is on */
__attribute__((noreturn, used)) static void reset_c(void) {
  memcpy(&__data_start, &__data_load, (size_t)((char *)&__data_end - (char *)&__data_start));
  memset(&__bss_start__, 0, (size_t)((char *)&__bss_end__ - (char *)&__bss_start__));
  memset(&__ddr_bss_start, 0, (size_t)((char *)&__ddr_bss_end - (char *)&__ddr_bss_start));
  initialise_monitor_handles();
  __libc_init_array();
  int rc = main();
  printf("[an547] main returned %d\n", rc);
  pte_lab_semihost_exit(rc);
}

/* naked: no compiler-generated code (and so no FP register use) before CPACR is set */
__attribute__((naked, noreturn)) void Reset_Handler(void) {
  __asm__ volatile(
      "ldr r0, =0xE000ED88\n" /* SCB->CPACR */
      "ldr r1, [r0]\n"
      "orr r1, r1, #(0xF << 20)\n" /* CP10, CP11: full access */
      "str r1, [r0]\n"
      "dsb\n"
      "isb\n"
      "b reset_c\n");
}

static void fault(const char *name) {
  uint32_t *sp;
  __asm__ volatile("mrs %0, msp" : "=r"(sp));
  /* the stacked frame's PC is the 7th word (no FP context assumed; good enough for a hint) */
  printf("[an547] %s: stacked pc 0x%08lx lr 0x%08lx CFSR 0x%08lx\n", name, (unsigned long)sp[6],
         (unsigned long)sp[5], (unsigned long)*(volatile uint32_t *)0xE000ED28);
  pte_lab_semihost_exit(3);
}

void NMI_Handler(void) { fault("NMI"); }
void HardFault_Handler(void) { fault("HardFault"); }
void MemManage_Handler(void) { fault("MemManage"); }
void BusFault_Handler(void) { fault("BusFault"); }
void UsageFault_Handler(void) { fault("UsageFault"); }
void SecureFault_Handler(void) { fault("SecureFault"); }
void Default_Handler(void) { fault("unexpected interrupt"); }

typedef void (*vector_t)(void);
__attribute__((section(".vectors"), used)) const vector_t vector_table[16 + 16] = {
    (vector_t)&__stack_top, Reset_Handler, NMI_Handler, HardFault_Handler, MemManage_Handler,
    BusFault_Handler, UsageFault_Handler, SecureFault_Handler, 0, 0, 0, Default_Handler /* SVC */,
    Default_Handler /* DebugMon */, 0, Default_Handler /* PendSV */, Default_Handler /* SysTick */,
    /* the first 16 external interrupts: none is enabled */
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, Default_Handler, Default_Handler,
};

/* crtbegin.o's (not linked with -nostartfiles): the handle __cxa_atexit registrations name */
__attribute__((visibility("hidden"))) void *__dso_handle = &__dso_handle;
