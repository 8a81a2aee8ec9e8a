// SPDX-License-Identifier: MIT
#include "file_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int file_meta_lookup(int root_fd, const char *relpath, uint64_t resolve_extra,
		     struct file_meta *meta, int *fd_out)
{
	/* RESOLVE_BENEATH refuses ".." out of the root and every absolute
	 * symlink (even one into the root) while allowing relative links
	 * that stay inside it, which is what a static site with relative
	 * symlinks expects. O_NONBLOCK keeps a FIFO planted in the root
	 * from blocking the worker. */
	struct open_how how = {
		.flags = (fd_out ? O_RDONLY | O_NONBLOCK | O_NOCTTY : O_PATH) |
			 O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
			   resolve_extra,
	};
	struct stat st;
	int fd;

	fd = (int)syscall(SYS_openat2, root_fd, *relpath ? relpath : ".", &how,
			  sizeof(how));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	meta->size = (uint64_t)st.st_size;
	meta->ino = st.st_ino;
	meta->dev = st.st_dev;
	meta->mtime_sec = st.st_mtim.tv_sec;
	meta->mtime_nsec = st.st_mtim.tv_nsec;
	meta->mode = st.st_mode;
	meta->cache_gen = 0;
	if (fd_out)
		*fd_out = fd;
	else
		close(fd);
	return 0;
}
