/* Signal set-up shared by the library's output transactions and the tools
 * (see util/signals.h). Plain POSIX: nothing of libfalcon. */
#include <signal.h>
#include <string.h>
#include "signals.h"

/* Every signal whose default action terminates the process and that can be caught. */
static const int term_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,   SIGBUS,  SIGFPE,
                                   SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,   SIGXCPU, SIGVTALRM,
                                   SIGPROF, SIGIO,   SIGPWR,  SIGSYS,
#ifdef SIGSTKFLT
                                   SIGSTKFLT,
#endif
};

void falcon_catch_terminating_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof term_signals / sizeof term_signals[0]; i++) {
        struct sigaction old;
        /* Only signals left at their default: an ignored one stays ignored
         * (nohup, a background job's SIGINT), a handler already there (a
         * sanitizer's SIGSEGV) stays in charge. */
        if (sigaction(term_signals[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            sigaction(term_signals[i], &sa, NULL);
    }
    for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
        struct sigaction old;
        if (sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            sigaction(s, &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN); /* a write past the size limit fails with EFBIG, and is reported */
}
