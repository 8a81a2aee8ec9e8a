/* SPDX-License-Identifier: MIT */
/* Error log (stderr, syslog priority prefixes for journald) and access log. */
#ifndef ORCD_LOG_H
#define ORCD_LOG_H

#include <stdint.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>

#include "http_parse.h"
#include "logbuf.h"

/* "<3>orcd: message\n" as one write(2) to stderr. prio: LOG_ERR, ... */
void log_msg(int prio, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct access_log;

/* spec: "-"/"stdout" or a file path (O_APPEND|O_CREAT, 0640). A FIFO
 * must have a reader when it is opened (here and at each reopen):
 * -ENXIO otherwise, never a wait. */
int access_log_open(const char *spec, struct access_log **out);
/* What an error of opening the access log means (access_log_open(),
 * _reopen(), the check of --check-config), for a message. */
const char *access_log_strerror(int err);
/* Reopen the path (logrotate); atomic for concurrent writers. Workers'
 * buffered lines go wherever the log points when they are flushed: hand
 * them out first (server.c does). */
int access_log_reopen(struct access_log *l);
void access_log_close(struct access_log *l);

/*
 * One worker's access log buffer: lines are written in batches of whole
 * lines, one write(2) each, of at most 64 KiB to a regular file (O_APPEND
 * keeps each batch in one piece there) and at most PIPE_BUF to anything
 * else (a pipe writes that much in one piece). A batch goes out when it
 * is full or LOGBUF_AGE_MS old at the next line or tick, at
 * access_log_flush() and at access_log_buf_fini(). Worker thread only.
 */
struct access_log_buf {
	struct access_log *l; /* NULL: no access log */
	struct logbuf b;
};

/* Never fails: without memory for the buffer, lines go one by one. */
void access_log_buf_init(struct access_log_buf *b, struct access_log *l);
void access_log_buf_fini(struct access_log_buf *b);
void access_log_flush(struct access_log_buf *b);
void access_log_tick(struct access_log_buf *b, int64_t now_ms);

/* One combined-format line into the buffer. req may be NULL (request
 * unparsable): the request field is then "-". */
void access_log_write(struct access_log_buf *b, const struct sockaddr *peer,
		      const struct http_request *req, int status,
		      uint64_t bytes, time_t now);

#endif
