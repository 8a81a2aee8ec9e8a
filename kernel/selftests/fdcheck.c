// SPDX-License-Identifier: GPL-2.0
#include "fdcheck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

int fd_lowest_free(int from)
{
	int fd = from < 0 ? 0 : from;

	while (fd_is_open(fd))
		fd++;
	return fd;
}

int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

ino_t fd_ino(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : st.st_ino;
}

ino_t path_ino(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : st.st_ino;
}

int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	if (n < 0 || (size_t)n != len) {
		int err = n < 0 ? -errno : -EIO;

		close(fd);
		return err;
	}
	return close(fd) ? -errno : 0;
}

char *make_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	static char path[4096];

	snprintf(path, sizeof(path), "%s/specific-fd-XXXXXX",
		 base && *base ? base : "/tmp");
	return mkdtemp(path);
}

long read_nr_open(void)
{
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

bool write_nr_open(long v)
{
	FILE *f = fopen("/proc/sys/fs/nr_open", "we");
	bool ok;

	if (!f)
		return false;
	ok = fprintf(f, "%ld\n", v) > 0;
	return !fclose(f) && ok;
}
