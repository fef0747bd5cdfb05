#ifndef C_PROCESS_ARGUMENTS_H
#define C_PROCESS_ARGUMENTS_H

/// The process's argument count and vector as glibc handed them to the executable's ELF
/// constructors (0 and NULL before that, or on a C library that hands none).
int CProcessArguments_count(void);
char *const *CProcessArguments_vector(void);

#endif
