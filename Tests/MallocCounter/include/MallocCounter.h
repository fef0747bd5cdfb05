#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H
#include <stddef.h>
/// Heap allocations (malloc, calloc, realloc) made so far by the calling thread.
/// The test executable links this target: its malloc/calloc/realloc take the place of glibc's
/// for the whole test process, or, under AddressSanitizer, the sanitizer's allocator hook counts.
unsigned long malloc_counter_thread_allocations(void);
/// The size the calling thread's latest malloc asked for.
unsigned long malloc_counter_last_request(void);
/// The usable size of a block glibc's allocator hands out for `request` bytes (its own
/// malloc_usable_size, also under a sanitizer, whose allocator answers the size asked for).
unsigned long malloc_counter_glibc_usable_size(size_t request);
#endif
