/* buildinfo.h: how falcon-bench was built (bench/buildinfo.c, rebuilt by
 * mk/bench.mk whenever the revision, the compiler or the flags change); the
 * study's stream results name their build with it too (study/stab-resume.c). */
#ifndef FALCON_BENCH_BUILDINFO_H
#define FALCON_BENCH_BUILDINFO_H

extern const char fb_build_git_revision[]; /* git rev-parse --short HEAD (+ "-dirty"), or "unknown" */
extern const char fb_build_cc[];           /* $(CC) and its version */
extern const char fb_build_cflags[];       /* CFLAGS of the C objects */
extern const char fb_build_cxxflags[];     /* flags of the C++ shim */

#endif
