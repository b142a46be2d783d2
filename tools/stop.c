/* See stop.h. */
#include <signal.h>
#include <stddef.h>

#include "stop.h"

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
    stop_sig = sig;
}

void cli_stop_install(void)
{
    struct sigaction sa = { 0 }, old;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: a write or wait in flight continues; the callback is
     * what stops the work, at a point where the library can clean up. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
}

int cli_stop_requested(void)
{
    return stop_sig;
}

void cli_stop_reraise(void)
{
    int sig = stop_sig;
    if (!sig)
        return;
    signal(sig, SIG_DFL);
    raise(sig);
}
