/* SPDX-License-Identifier: GPL-2.0 */
/* Looking at the fd table from inside: what is open, what is free. */
#ifndef FDCHECK_H
#define FDCHECK_H

#include <stdbool.h>
#include <sys/types.h>

bool fd_is_open(int fd);
/* Lowest fd >= @from that is not open (only installed fds are seen). */
int fd_lowest_free(int from);
/* Number of open fds, from /proc/self/fd; -1 if unreadable. */
int fd_count(void);
/* Inode number behind @fd, 0 on error. */
ino_t fd_ino(int fd);
/* Inode number of @path, 0 on error. */
ino_t path_ino(const char *path);
/* Write @len bytes of @data to a new file @path; 0 or -errno. */
int write_file(const char *path, const void *data, size_t len);
/* Make a fresh private directory for test files; NULL on error. */
char *make_tmpdir(void);
/* fs.nr_open, or -1 if unreadable; set it (root only): true on success. */
long read_nr_open(void);
bool write_nr_open(long v);

#endif /* FDCHECK_H */
