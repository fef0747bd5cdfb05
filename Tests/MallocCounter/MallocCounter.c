// Counting allocator for tests that assert how many allocations a code path makes (the relay's
// forwarding path). Without a sanitizer: a pass-through malloc. Symbols defined in the
// executable take precedence over libc's for every library in the process; glibc exports its
// own implementations as __libc_malloc and friends, so no dlsym (which may itself allocate) is
// needed. Under AddressSanitizer (the test suite's build), whose allocator owns malloc: the
// allocator's own hook, which it calls for every allocation (malloc, calloc, realloc).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>
#include "MallocCounter.h"

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *pointer);

static __thread unsigned long allocations;
static __thread size_t last_request;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MALLOC_COUNTER_SANITIZER_HOOK 1
#endif
#endif

#ifdef MALLOC_COUNTER_SANITIZER_HOOK
#include <sanitizer/allocator_interface.h>

static void counted(const volatile void *block, size_t size) {
    (void)block;
    allocations++;
    last_request = size;
}

// The sanitizer takes both hooks or neither.
static void freed(const volatile void *block) { (void)block; }

__attribute__((constructor)) static void install_counting_hook(void) {
    __sanitizer_install_malloc_and_free_hooks(counted, freed);
}
#else
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);

void *malloc(size_t size) {
    allocations++;
    last_request = size;
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    allocations++;
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    allocations++;
    return __libc_realloc(pointer, size);
}
#endif

unsigned long malloc_counter_thread_allocations(void) { return allocations; }

unsigned long malloc_counter_last_request(void) { return last_request; }

unsigned long malloc_counter_glibc_usable_size(size_t request) {
    // glibc's malloc_usable_size even where a sanitizer defines its own: the next definition
    // after this executable's.
    static size_t (*glibc_usable_size)(void *);
    if (!glibc_usable_size) glibc_usable_size = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    void *block = __libc_malloc(request);
    unsigned long usable = glibc_usable_size(block);
    __libc_free(block);
    return usable;
}
