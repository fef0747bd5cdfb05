// The package's version, given to the build by scripts/package.sh as
// -Xcc -DWIMZ_PACKAGE_VERSION="…": only the packaging script knows it (it reads git for the
// ~dev.N+gHASH of a build between releases), and a binary must say exactly which it is.
#include "CBuildStamp.h"

const char *CBuildStamp_packageVersion(void) {
#ifdef WIMZ_PACKAGE_VERSION
    return WIMZ_PACKAGE_VERSION;
#else
    return 0;
#endif
}
