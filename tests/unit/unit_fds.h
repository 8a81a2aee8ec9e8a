/* SPDX-License-Identifier: MIT */
/* For unit tests (after <cmocka.h>): how many fds this process has open,
 * to prove that code under test leaks none. */
#ifndef ORCD_UNIT_FDS_H
#define ORCD_UNIT_FDS_H

#include <dirent.h>

static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

#endif
