#ifndef C_BUILD_STAMP_H
#define C_BUILD_STAMP_H

/// The package version this binary was built as (scripts/package.sh defines
/// WIMZ_PACKAGE_VERSION for its build), or NULL for a build no package script stamped.
const char *CBuildStamp_packageVersion(void);

#endif
