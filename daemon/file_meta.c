// SPDX-License-Identifier: MIT
#include "file_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int open_beneath(int root_fd, const char *relpath, uint64_t flags,
			uint64_t resolve_extra)
{
	/* RESOLVE_BENEATH refuses ".." out of the root and every absolute
	 * symlink (even one into the root) while allowing relative links
	 * that stay inside it, which is what a static site with relative
	 * symlinks expects. */
	struct open_how how = {
		.flags = flags | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
			   resolve_extra,
	};

	return (int)syscall(SYS_openat2, root_fd, *relpath ? relpath : ".",
			    &how, sizeof(how));
}

/* fd's facts into meta; fd is closed on failure. */
static int meta_of(int fd, struct file_meta *meta)
{
	struct stat st;

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
	return 0;
}

int file_meta_lookup(int root_fd, const char *relpath, uint64_t resolve_extra,
		     struct file_meta *meta, int *fd_out)
{
	int fd = open_beneath(root_fd, relpath, O_PATH, resolve_extra), err;

	if (fd < 0)
		return -errno;
	err = meta_of(fd, meta);
	if (err)
		return err;
	close(fd);
	if (!fd_out)
		return 0;
	*fd_out = -1;
	/* Only a regular file is opened for reading: the open of a FIFO
	 * lets its blocked writer go on, a device's runs its driver. */
	if (!S_ISREG(meta->mode))
		return 0;
	/* O_NONBLOCK: were it a FIFO by now, the open does not wait. The
	 * facts are the opened file's, whatever the path names by now. */
	fd = open_beneath(root_fd, relpath, O_RDONLY | O_NONBLOCK | O_NOCTTY,
			  resolve_extra);
	if (fd < 0)
		return -errno;
	err = meta_of(fd, meta);
	if (err)
		return err;
	if (S_ISREG(meta->mode))
		*fd_out = fd;
	else
		close(fd);
	return 0;
}
