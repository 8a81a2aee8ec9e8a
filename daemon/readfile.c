// SPDX-License-Identifier: MIT
#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READFILE_FLAGS (O_NOFOLLOW | O_NOATIME)

/* Provisional out-of-tree number, x86_64 only (kernel/patches/0007). */
#if defined(__NR_readfile)
#define READFILE_NR __NR_readfile
#elif defined(__x86_64__)
#define READFILE_NR 451
#endif

/*
 * Whether the kernel has the syscall is a fact about the process, not
 * about a caller: it is probed once and kept, process-wide, as nothing
 * but an enum readfile_impl. Racing first callers probe twice and store
 * the same answer.
 */
static _Atomic int impl = READFILE_UNPROBED;

static ssize_t emulate(int dfd, const char *path, void *buf, size_t size,
		       int flags)
{
	ssize_t n;
	int fd, err;

	fd = openat(dfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | flags);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, size);
	while (n < 0 && errno == EINTR);
	err = errno;
	close(fd);
	return n < 0 ? -err : n;
}

#ifdef READFILE_NR
static ssize_t sys_readfile(int dfd, const char *path, void *buf, size_t size,
			    int flags)
{
	long n = syscall(READFILE_NR, dfd, path, buf, size, flags);

	return n < 0 ? -errno : n;
}

/*
 * Stock 6.1 answers ENOSYS; kernels from 6.5 on have cachestat() at 451,
 * which takes these arguments as flags == 1 and fails. Only readfile()
 * reads /dev/null and returns 0, so nothing else is ever called with a
 * caller's buffer.
 */
static int probe(void)
{
	char c;

	if (sys_readfile(AT_FDCWD, "/dev/null", &c, 1, 0) == 0)
		return READFILE_SYSCALL;
	return READFILE_EMULATED;
}
#else
static int probe(void)
{
	return READFILE_EMULATED;
}
#endif

enum readfile_impl orcd_readfile_impl(void)
{
	int i = atomic_load_explicit(&impl, memory_order_relaxed);

	if (i == READFILE_UNPROBED) {
		i = probe();
		atomic_store_explicit(&impl, i, memory_order_relaxed);
	}
	return (enum readfile_impl)i;
}

ssize_t orcd_readfile(int dfd, const char *path, void *buf, size_t size,
		      int flags)
{
	if (flags & ~READFILE_FLAGS)
		return -EINVAL;
#ifdef READFILE_NR
	if (orcd_readfile_impl() == READFILE_SYSCALL) {
		ssize_t n = sys_readfile(dfd, path, buf, size, flags);

		/* e.g. a seccomp filter installed since the probe */
		if (n != -ENOSYS)
			return n;
		atomic_store_explicit(&impl, READFILE_EMULATED,
				      memory_order_relaxed);
	}
#endif
	return emulate(dfd, path, buf, size, flags);
}
