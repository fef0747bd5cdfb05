#ifndef CEPOLL_SHIM_H
#define CEPOLL_SHIM_H
/* Linux calls Glibc's Swift module does not include: epoll (the benchmark's load generator, and
 * the relay's gate, which takes handed-over descriptors out of libev's epoll set) and accept4
 * (declared by glibc only under _GNU_SOURCE). */
#include <sys/epoll.h>
#include <sys/socket.h>

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/** accept(2) whose new descriptor is non-blocking and close-on-exec: one call, not three. */
static inline int CEpoll_acceptNonBlocking(int listener) {
    return accept4(listener, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
#endif
