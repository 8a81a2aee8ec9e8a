/* SPDX-License-Identifier: MIT */
/* Listening sockets: our own (SO_REUSEPORT, one set per worker) or the
 * ones systemd passed (shared by all workers). */
#ifndef ORCD_LISTEN_H
#define ORCD_LISTEN_H

#include "config.h"

/*
 * Open and bind one listening socket for l. Returns the fd or -errno;
 * err says which address failed and why.
 */
int listen_open(const struct orcd_listen *l, char *err, size_t cap);

/*
 * 0 when nothing listens on l's address yet, else -EADDRINUSE (-errno)
 * with err set. The workers' sockets use SO_REUSEPORT, which would let a
 * second orcd (or anything of the same uid with SO_REUSEPORT) silently
 * share the port and take part of its connections; a bind without it
 * fails on an address in use. Call once per address, before any worker's
 * socket for it exists.
 */
int listen_check_free(const struct orcd_listen *l, char *err, size_t cap);

/* FileDescriptorName= of a passed socket that serves the metrics page. */
#define LISTEN_METRICS_NAME "metrics"

/*
 * Sockets passed by systemd (LISTEN_FDS, LISTEN_FDNAMES), checked to be
 * listening stream sockets and made non-blocking. The one named
 * LISTEN_METRICS_NAME goes to *metrics_fd (-1 when there is none); every
 * other name serves HTTP. Returns how many HTTP sockets were stored in
 * fds (0 when not socket-activated), or -errno with err set.
 */
int listen_passed(int *fds, unsigned max, int *metrics_fd, char *err,
		  size_t cap);

#endif
