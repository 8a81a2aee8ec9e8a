/* SPDX-License-Identifier: MIT */
/*
 * The HTTP core's decision for one request: which status, which head,
 * which byte range of which file. Engines execute the plan; they never
 * look inside HTTP. Everything here but the metadata lookup is pure.
 */
#ifndef ORCD_RESPOND_H
#define ORCD_RESPOND_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "http_parse.h"

struct stat_cache;

struct file_meta {
	uint64_t size;
	uint64_t ino;
	uint64_t dev;
	int64_t mtime_sec;
	long mtime_nsec;
	mode_t mode;
};

struct response_plan {
	int status;
	bool keep_alive;	/* connection stays open after this response */
	size_t head_len;	/* bytes rendered at the start of buf */
	size_t body_inline;	/* of head_len, bytes that are an error body */
	bool send_file;		/* a body comes from the file below */
	uint64_t offset;	/* first byte of the file to send */
	uint64_t length;	/* bytes of the file to send (may be 0) */
	int fd;			/* open file when RESPOND_KEEP_FD, else -1 */
	char relpath[PATH_MAX]; /* file to open, relative to cfg->root_fd */
	struct file_meta meta;	/* what the head was rendered from */
};

enum {
	/* Keep the file open in plan->fd (engines that send from an fd they
	 * opened synchronously). Without it the file is only stat'ed and the
	 * engine opens plan->relpath itself (io_uring chains). */
	RESPOND_KEEP_FD = 1u << 0,
};

/*
 * Look up metadata of relpath under root_fd without following symlinks
 * out of the root (openat2 RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, plus
 * resolve_extra). If fd_out is non-NULL the opened O_RDONLY fd is
 * returned there, else it is closed. Returns 0, -ENOENT, -EACCES, -EXDEV
 * (escapes the root), ...
 */
int respond_lookup(int root_fd, const char *relpath, uint64_t resolve_extra,
		   struct file_meta *meta, int *fd_out);

/*
 * Decide and render the response to a parsed request into buf[0..cap):
 * metadata comes from sc (NULL: looked up every time) unless
 * RESPOND_KEEP_FD asks for the file to be opened.
 * 405 with Allow for other methods, 400/404/301 from the path, index
 * files for directories, 304/206/416/200 from the validators. Error
 * statuses carry a small HTML body inside head_len (except for HEAD).
 * Returns 0 or -ENOSPC (cap too small) / -ENOMEM.
 */
int respond_plan(struct orcd_config *cfg, struct stat_cache *sc,
		 const struct http_request *req, time_t now, unsigned flags,
		 char *buf, size_t cap, struct response_plan *plan);

/*
 * Body bytes among `sent` bytes written for this plan (head excluded), for
 * the access log's combined format, which counts the body only.
 */
uint64_t respond_body_bytes(const struct response_plan *plan, uint64_t sent);

/*
 * Render an error response not tied to a parsed request (parse errors,
 * 408 on header timeout). Always closes the connection.
 */
int respond_error(const struct orcd_config *cfg, int status, time_t now,
		  char *buf, size_t cap, struct response_plan *plan);

/*
 * Render the error `status` as the answer to a parsed request (HEAD gets
 * no body; the connection stays as the request asked), for a refusal that
 * only an engine's own open finds out about.
 */
int respond_status(const struct http_request *req, int status, time_t now,
		   char *buf, size_t cap, struct response_plan *plan);

#endif
