/* Linked into a program (or libfalcon-ref.so): attaches the MPFR reference
 * to libfalcon before main runs, so FALCON_BACKEND_MPFR is available in
 * every process of it (a test runner's forked or re-executed workers too). */
#include "falcon_advanced.h"

__attribute__((constructor)) static void attach_reference(void) { falcon_reference_attach(); }
