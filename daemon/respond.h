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
#include "file_meta.h"
#include "http_parse.h"
#include "http_render.h"

/*
 * Where the planner gets file facts: fn answers like file_meta_lookup()
 * (root_fd = cfg->root_fd, no extra resolve flags, no fd), perhaps from a
 * cache the caller keeps true. NULL: every lookup goes to the filesystem.
 * readable (may be NULL: an open and a close) says whether the regular
 * file fn just described opens for reading (0 or -errno), which a HEAD,
 * having no transfer whose open would find out, must know.
 */
struct respond_lookup {
	int (*fn)(void *ctx, struct orcd_config *cfg, const char *relpath,
		  struct file_meta *meta);
	void *ctx;
	int (*readable)(void *ctx, struct orcd_config *cfg, const char *relpath,
			struct file_meta *meta);
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
 * Decide and render the response to a parsed request into buf[0..cap):
 * metadata comes from lk (NULL: looked up every time) unless
 * RESPOND_KEEP_FD asks for the file to be opened.
 * 405 with Allow for other methods (501 for unknown ones), 400/404/301
 * from the path, index files for directories, 304/206/416/200 from the
 * validators. Error statuses carry a small HTML body inside head_len
 * (except for HEAD).
 * Returns 0 or -ENOSPC (cap too small) / -ENOMEM.
 */
int respond_plan(struct orcd_config *cfg, const struct respond_lookup *lk,
		 const struct http_request *req, struct http_clock *clock,
		 unsigned flags, char *buf, size_t cap,
		 struct response_plan *plan);

/*
 * Body bytes among `sent` bytes written for this plan (head excluded), for
 * the access log's combined format, which counts the body only.
 */
uint64_t respond_body_bytes(const struct response_plan *plan, uint64_t sent);

/*
 * Render an error response not tied to a parsed request (parse errors,
 * 408 on header timeout). Always closes the connection. head_only: the
 * request line said HEAD, so no body goes (RFC 9110 9.3.2).
 */
int respond_error(const struct orcd_config *cfg, int status, bool head_only,
		  struct http_clock *clock, char *buf, size_t cap,
		  struct response_plan *plan);

/*
 * Render the error `status` as the answer to a parsed request (HEAD gets
 * no body; the connection stays as the request asked), for a refusal that
 * only an engine's own open finds out about.
 */
int respond_status(const struct http_request *req, int status,
		   struct http_clock *clock, char *buf, size_t cap,
		   struct response_plan *plan);

#endif
