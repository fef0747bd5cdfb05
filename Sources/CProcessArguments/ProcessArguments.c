// The Swift runtime on Linux reads CommandLine.arguments from /proc/self/cmdline, so a process
// started where /proc is not mounted (a chroot an operator or an installer test set up) would
// see no arguments at all and run as if none were given. glibc passes argc and argv to every
// ELF constructor; keeping them here lets the CLI parse what it was really given.
#include "CProcessArguments.h"

static int captured_count;
static char *const *captured_vector;

__attribute__((constructor))
static void CProcessArguments_capture(int argc, char **argv, char **envp) {
    (void)envp;
    captured_count = argc;
    captured_vector = argv;
}

int CProcessArguments_count(void) { return captured_count; }

char *const *CProcessArguments_vector(void) { return captured_vector; }
