/*
 * cuda-emu-fiber.h -- the cuda emulator's fiber switch (cuda-emu.h; TEST
 * BUILDS ONLY, included once, by the translation unit that defines
 * NF_CUDA_EMU_IMPLEMENTATION).
 *
 * A fiber switch happens at every barrier of every emulated thread, twice
 * (to the scheduler and back). glibc's swapcontext saves and restores the
 * signal mask with a system call each time, which made those calls most of
 * the emulator's time (a TabSTAR fit: ~70 % in swapcontext, rt_sigprocmask
 * and the kernel's copies). On x86-64 the switch is therefore a few
 * instructions of our own: push the callee-saved registers (System V ABI:
 * rbx, rbp, r12-r15) and the SSE / x87 control words, store the stack
 * pointer, load the other one, pop. The signal mask is the thread's and
 * never changes. A new fiber's stack is laid out as if it had switched away
 * at its entry: the first switch to it "returns" into fiber_entry.
 * Elsewhere: makecontext / swapcontext, as before.
 */
#ifndef NF_CUDA_EMU_FIBER_H
#define NF_CUDA_EMU_FIBER_H

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && !defined(NF_CUDA_EMU_UCONTEXT)
#define NF_EMU_OWN_SWITCH 1
/* nf_emu_switch(&save, to): saves this context's stack pointer in *save and
 * continues the context whose stack pointer is to */
extern "C" void nf_emu_switch(void ** save, void * to);
__asm__(".pushsection .text\n"
        ".globl nf_emu_switch\n"
        ".type nf_emu_switch, @function\n"
        "nf_emu_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size nf_emu_switch, .-nf_emu_switch\n"
        ".popsection\n");

namespace nf_emu {
struct fiber_ctx {
    void * sp = nullptr;
};
/* a stack (top = base + size) that starts entry() on the first switch to it;
 * entry never returns (it switches away for the last time) */
static inline void fiber_ctx_make(fiber_ctx & c, unsigned char * base, size_t size, void (*entry)()) {
    uintptr_t top = ((uintptr_t) (base + size)) & ~(uintptr_t) 15;
    uint64_t * p = (uint64_t *) top;
    *--p = 0;                             /* entry's (absent) return address: rsp = 8 mod 16 at entry */
    *--p = (uint64_t) (uintptr_t) entry;  /* nf_emu_switch's ret */
    for (int r = 0; r < 6; r++) *--p = 0; /* rbp, rbx, r12-r15 */
    uint32_t cw[2] = {0, 0};
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(cw[0]), "=m"(cw[1]));
    *--p = 0;
    memcpy(p, cw, sizeof(cw)); /* the creator's MXCSR and x87 control word */
    c.sp = p;
}
static inline void fiber_ctx_switch(fiber_ctx & from, fiber_ctx & to) { nf_emu_switch(&from.sp, to.sp); }
} // namespace nf_emu

#else /* ucontext */
#include <ucontext.h>
namespace nf_emu {
struct fiber_ctx {
    ucontext_t uc;
};
[[gnu::noinline]] static void fiber_ctx_make(fiber_ctx & c, unsigned char * base, size_t size, void (*entry)()) {
    if (getcontext(&c.uc) != 0) abort();
    c.uc.uc_stack.ss_sp = base;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr; /* entry switches away for the last time, never returns */
    makecontext(&c.uc, entry, 0);
}
/* swapcontext returns twice: kept out of the callers' frames */
[[gnu::noinline]] static void fiber_ctx_switch(fiber_ctx & from, fiber_ctx & to) {
    if (swapcontext(&from.uc, &to.uc) != 0) abort();
}
} // namespace nf_emu
#endif

#endif
