#ifndef CEPOLL_SHIM_H
#define CEPOLL_SHIM_H
/* epoll for the benchmark's load generator (Glibc's Swift module does not include it). */
#include <sys/epoll.h>
#endif
