/* SPDX-License-Identifier: GPL-2.0 */
/*
 * readfile(2) as added by the orcd series (provisional syscall number 451 on
 * x86_64).  Defined here so the tests build against stock headers too.
 */
#ifndef READFILE_ABI_H
#define READFILE_ABI_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __NR_readfile
#define SYS_readfile_nr __NR_readfile
#else
#define SYS_readfile_nr 451
#endif

static inline long sys_readfile(int dfd, const char *path, void *buf,
				size_t bufsize, int flags)
{
	return syscall(SYS_readfile_nr, dfd, path, buf, bufsize, flags);
}

/*
 * What readfile() stands for: openat + one read + close.  The reference the
 * tests compare with and the baseline of the benchmark; -errno on error.
 */
static inline long open_read_close(int dfd, const char *path, void *buf,
				   size_t len, int flags)
{
	int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC | flags);
	long n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

#endif /* READFILE_ABI_H */
