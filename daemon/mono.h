/* SPDX-License-Identifier: MIT */
/*
 * The one clock deadlines are kept in: CLOCK_MONOTONIC in milliseconds
 * (read through the vDSO, no system call). The connection core, the
 * io_uring loop's timer wheel and the metrics page all count in it.
 */
#ifndef ORCD_MONO_H
#define ORCD_MONO_H

#include <stdint.h>
#include <time.h>

static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The same clock in microseconds, for waits shorter than a millisecond. */
static inline int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
