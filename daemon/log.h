/* SPDX-License-Identifier: MIT */
/* Error log (stderr, syslog priority prefixes for journald) and access log. */
#ifndef ORCD_LOG_H
#define ORCD_LOG_H

#include <stdint.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>

#include "http_parse.h"

/* "<3>orcd: message\n" as one write(2) to stderr. prio: LOG_ERR, ... */
void log_msg(int prio, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct access_log;

/* spec: "-"/"stdout" or a file path (O_APPEND|O_CREAT, 0640). */
int access_log_open(const char *spec, struct access_log **out);
/* Reopen the path (logrotate); atomic for concurrent writers. */
int access_log_reopen(struct access_log *l);
void access_log_close(struct access_log *l);

/* One combined-format line, written with one write(2). req may be NULL
 * (request unparsable): the request field is then "-". */
void access_log_write(struct access_log *l, const struct sockaddr *peer,
		      const struct http_request *req, int status,
		      uint64_t bytes, time_t now);

#endif
