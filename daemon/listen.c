// SPDX-License-Identifier: MIT
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"

#define LISTEN_BACKLOG 4096

int listen_open(const struct orcd_listen *l, char *err, size_t cap)
{
	int one = 1, fd, e;

	fd = socket(l->addr.ss_family,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		snprintf(err, cap, "listen %s: socket: %s", l->text,
			 strerror(errno));
		return e;
	}
	/* SO_REUSEPORT gives every worker its own accept queue, so the
	 * kernel spreads connections without a shared lock. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    (l->addr.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) ||
	    listen(fd, LISTEN_BACKLOG)) {
		e = -errno;
		snprintf(err, cap, "listen %s: %s", l->text, strerror(errno));
		close(fd);
		return e;
	}
	return fd;
}

static void free_names(char **names)
{
	char **p;

	for (p = names; p && *p; p++)
		free(*p);
	free(names);
}

/* Checks one passed fd; 0, or -errno with err set. */
static int passed_fd_ready(int fd, const char *name, char *err, size_t cap)
{
	if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
		snprintf(err, cap,
			 "socket activation: fd %d (%s) is not a listening stream socket",
			 fd, name);
		return -EINVAL;
	}
	/* Workers share these sockets: a blocking accept could hang on a
	 * connection another worker already took. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC)) {
		int e = -errno;

		snprintf(err, cap, "socket activation: fd %d (%s): %s", fd,
			 name, strerror(errno));
		return e;
	}
	return 0;
}

int listen_check_free(const struct orcd_listen *l, char *err, size_t cap)
{
	int one = 1, fd, e = 0;

	fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		snprintf(err, cap, "listen %s: socket: %s", l->text,
			 strerror(errno));
		return e;
	}
	/* SO_REUSEADDR as the real sockets, so TIME_WAIT leftovers of a
	 * previous run do not count; a listening socket still does. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (l->addr.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    bind(fd, (const struct sockaddr *)&l->addr, l->addrlen)) {
		e = -errno;
		snprintf(err, cap, "listen %s: %s", l->text, strerror(errno));
	}
	close(fd);
	return e;
}

int listen_passed(int *fds, unsigned max, int *metrics_fd, char *err,
		  size_t cap)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names), i, e = 0;
	unsigned got = 0;

	*metrics_fd = -1;
	if (n < 0) {
		snprintf(err, cap, "socket activation: %s", strerror(-n));
		return n;
	}
	for (i = 0; i < n && !e; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "unknown";

		e = passed_fd_ready(fd, name, err, cap);
		if (e)
			break;
		if (!strcmp(name, LISTEN_METRICS_NAME)) {
			if (*metrics_fd >= 0) {
				snprintf(err, cap,
					 "socket activation: fds %d and %d are both named %s",
					 *metrics_fd, fd, name);
				e = -EINVAL;
			}
			*metrics_fd = fd;
			continue;
		}
		if (got == max) {
			snprintf(err, cap,
				 "socket activation: more than %u HTTP sockets",
				 max);
			e = -E2BIG;
			break;
		}
		fds[got++] = fd;
		log_msg(LOG_INFO, "socket activation: fd %d (%s) serves HTTP",
			fd, name);
	}
	free_names(names);
	return e ? e : (int)got;
}
