/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Is the running kernel carrying the series?  Each probe is one cheap call
 * that a stock kernel rejects with a well-known error, so tests can SKIP
 * (feature absent) instead of failing.
 */
#ifndef PROBE_H
#define PROBE_H

#include <stdbool.h>

enum {
	HAVE_MIN_FD = 1u << 0,		/* PR_INCREASE_MIN_FD */
	HAVE_OPENAT2_FD = 1u << 1,	/* openat2 O_SPECIFIC_FD */
	HAVE_PIPE2_FD = 1u << 2,	/* pipe2 O_SPECIFIC_FD */
	HAVE_READFILE = 1u << 3,	/* readfile(2) */
};

#define MISSING_MIN_FD "PR_INCREASE_MIN_FD not supported by this kernel"
#define MISSING_OPENAT2_FD "openat2 O_SPECIFIC_FD not supported by this kernel"
#define MISSING_PIPE2_FD "pipe2 O_SPECIFIC_FD not supported by this kernel"
#define MISSING_READFILE "readfile() not supported by this kernel"

/* Probe in a forked child, so the parent's fd table stays pristine. */
unsigned int probe_features(void);

#endif /* PROBE_H */
