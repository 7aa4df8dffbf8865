/* Signal set-up shared by the library's output transactions (src/) and
 * `falcon cases export` (grade/). */
#ifndef FALCON_UTIL_SIGNALS_H
#define FALCON_UTIL_SIGNALS_H

/* Handler for every catchable signal whose default action ends the process
 * and that is still at its default (an ignored one stays ignored, a
 * sanitizer's handler stays in charge), every other signal blocked while it
 * runs; SIGXFSZ ignored, so that a write past the size limit fails (EFBIG)
 * and is reported. */
void falcon_catch_terminating_signals(void (*handler)(int));

#endif
