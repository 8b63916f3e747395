/* The version strings (version.h); KCSI_VERSION is defined for this file alone. */
#include "base/version.h"

#ifndef KCSI_VERSION
#define KCSI_VERSION "v0.0.0"
#endif

const char kcsi_version[] = KCSI_VERSION;
const char kcsi_csi_user_agent[] = "kcsi/" KCSI_VERSION;
