// SPDX-License-Identifier: MIT
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

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

int listen_passed(int *fds, unsigned max, char *err, size_t cap)
{
	int n = sd_listen_fds(1), i;

	if (n < 0) {
		snprintf(err, cap, "socket activation: %s", strerror(-n));
		return n;
	}
	if ((unsigned)n > max) {
		snprintf(err, cap, "socket activation: %d sockets, at most %u",
			 n, max);
		return -E2BIG;
	}
	for (i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			snprintf(err, cap,
				 "socket activation: fd %d is not a listening stream socket",
				 fd);
			return -EINVAL;
		}
		/* Workers share these sockets: a blocking accept could
		 * hang on a connection another worker already took. */
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
		    fcntl(fd, F_SETFD, FD_CLOEXEC)) {
			snprintf(err, cap, "socket activation: fd %d: %s", fd,
				 strerror(errno));
			return -errno;
		}
		fds[i] = fd;
	}
	return n;
}
