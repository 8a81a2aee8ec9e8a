/* SPDX-License-Identifier: MIT */
/*
 * Read a small file whole in one call: readfile(2) from the orcd kernel
 * series when the running kernel has it, else openat + read + close with
 * the same semantics. Meant for small files read synchronously (/proc,
 * sysfs, configuration); the request path uses io_uring chains instead.
 */
#ifndef ORCD_READFILE_H
#define ORCD_READFILE_H

#include <stddef.h>
#include <sys/types.h>

enum readfile_impl {
	READFILE_UNPROBED = 0, /* nothing read yet */
	READFILE_SYSCALL,      /* the kernel's readfile(2) */
	READFILE_EMULATED,     /* openat + read + close */
};

/*
 * One read of up to @size bytes from offset 0 of @path (relative to @dfd,
 * as for openat) into @buf. @flags may hold O_NOFOLLOW and O_NOATIME.
 * Returns the number of bytes read (less than the file's size if @size is
 * short, like read) or -errno: those of openat and read, -EINVAL for other
 * flags. No fd is left behind either way.
 */
ssize_t orcd_readfile(int dfd, const char *path, void *buf, size_t size,
		      int flags);

/* Which implementation orcd_readfile() uses in this process. */
enum readfile_impl orcd_readfile_impl(void);

#endif /* ORCD_READFILE_H */
