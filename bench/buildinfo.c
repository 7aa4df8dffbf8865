/* buildinfo.c: build facts passed by mk/bench.mk as -D macros (strings). */
#include "buildinfo.h"

#ifndef FB_GIT_REVISION
#define FB_GIT_REVISION "unknown"
#endif
#ifndef FB_CC
#define FB_CC "cc"
#endif
#ifndef FB_CFLAGS
#define FB_CFLAGS "unknown"
#endif
#ifndef FB_CXXFLAGS
#define FB_CXXFLAGS "unknown"
#endif

const char fb_build_git_revision[] = FB_GIT_REVISION;
const char fb_build_cc[] = FB_CC " (" __VERSION__ ")";
const char fb_build_cflags[] = FB_CFLAGS;
const char fb_build_cxxflags[] = FB_CXXFLAGS;
