#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H
/// Heap allocations (malloc, calloc, realloc) made so far by the calling thread.
/// The test executable links this target, so its malloc/calloc/realloc take the place of
/// glibc's for the whole test process; each forwards to glibc's implementation.
unsigned long malloc_counter_thread_allocations(void);
/// The size the calling thread's latest malloc asked for.
unsigned long malloc_counter_last_request(void);
/// The usable size of a block malloc handed out (glibc's malloc_usable_size).
unsigned long malloc_counter_usable_size(void *block);
#endif
