#ifndef CEPOLL_SHIM_H
#define CEPOLL_SHIM_H
/* epoll (Glibc's Swift module does not include it): the benchmark's load generator, and the
 * relay's gate, which takes handed-over descriptors out of libev's epoll set. */
#include <sys/epoll.h>
#endif
