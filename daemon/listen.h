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
 * Sockets passed by systemd (LISTEN_FDS), checked to be listening stream
 * sockets. Returns how many (0 when not socket-activated) and stores them
 * in fds, or -errno with err set.
 */
int listen_passed(int *fds, unsigned max, char *err, size_t cap);

#endif
