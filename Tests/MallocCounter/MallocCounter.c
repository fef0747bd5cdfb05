#include <malloc.h>
// Counting pass-through allocator for tests that assert how many allocations a code path
// makes (the relay's forwarding path). Symbols defined in the executable take precedence over
// libc's for every library in the process; glibc exports its own implementations as
// __libc_malloc and friends, so no dlsym (which may itself allocate) is needed.
#include <stddef.h>
#include "MallocCounter.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);

static __thread unsigned long allocations;
static __thread size_t last_request;

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MALLOC_COUNTER_DISABLED 1  /* the sanitizer's allocator owns malloc (the test is skipped) */
#endif
#endif

#ifndef MALLOC_COUNTER_DISABLED
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

unsigned long malloc_counter_usable_size(void *block) { return malloc_usable_size(block); }
