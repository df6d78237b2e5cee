/* clock: the daemon's time for timeouts and periods, in milliseconds of
 * CLOCK_MONOTONIC (which never steps when the wall clock is set). */
#ifndef SKILLFS_CLOCK_H
#define SKILLFS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now, in milliseconds since an arbitrary start. */
int64_t clock_ms(void);

/* The instant ms (on clock_ms's scale, >= 0) as pthread_cond_clockwait
 * takes it with CLOCK_MONOTONIC. */
struct timespec clock_ms_timespec(int64_t ms);

#endif
