/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The userspace ABI of the orcd "specific fd" kernel series, defined here so
 * the selftests build both against the patched uapi headers (HDRS=...) and
 * against a stock distribution's headers.  Values must match the series.
 */
#ifndef SPECIFIC_FD_ABI_H
#define SPECIFIC_FD_ABI_H

#include <fcntl.h>
#include <linux/types.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_INCREASE_MIN_FD
#define PR_INCREASE_MIN_FD 0x4f524344	/* "ORCD" */
#endif

#ifndef O_SPECIFIC_FD
#define O_SPECIFIC_FD 01000000000
#endif

#ifndef IORING_ACCEPT_SPECIFIC_FD
#define IORING_ACCEPT_SPECIFIC_FD (1U << 15)
#endif

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/*
 * struct open_how as extended by the series (OPEN_HOW_SIZE_VER1).  Our own
 * name, so it never clashes with whichever <linux/openat2.h> is in use.
 */
struct open_how_v1 {
	__u64 flags;
	__u64 mode;
	__u64 resolve;
	__u32 fd;
	__u32 __padding;
};

#define OPEN_HOW_SIZE_V0 24
#define OPEN_HOW_SIZE_V1 32

_Static_assert(sizeof(struct open_how_v1) == OPEN_HOW_SIZE_V1,
	       "open_how VER1 is 32 bytes");

/* fd value meaning "lowest available" for O_SPECIFIC_FD */
#define SPECIFIC_FD_ANY ((__u32)-1)

static inline int sys_openat2(int dfd, const char *path,
			      const struct open_how_v1 *how, size_t size)
{
	return syscall(SYS_openat2, dfd, path, how, size);
}

/* openat2(O_SPECIFIC_FD) of @path at @fd with @flags; -1/errno on error */
static inline int open_at_fd(const char *path, int flags, __u32 fd)
{
	struct open_how_v1 how = {
		.flags = (__u64)flags | O_SPECIFIC_FD,
		.mode = (flags & O_CREAT) ? 0600 : 0,
		.fd = fd,
	};

	return sys_openat2(AT_FDCWD, path, &how, sizeof(how));
}

#endif /* SPECIFIC_FD_ABI_H */
