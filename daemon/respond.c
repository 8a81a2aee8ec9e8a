// SPDX-License-Identifier: MIT
#include "respond.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http_cond.h"
#include "http_render.h"
#include "mime.h"
#include "path.h"

#define SERVER_NAME "orcd/" ORCD_VERSION

static void plan_init(struct response_plan *plan, bool keep_alive)
{
	plan->status = 0;
	plan->keep_alive = keep_alive;
	plan->head_len = 0;
	plan->body_inline = 0;
	plan->send_file = false;
	plan->offset = 0;
	plan->length = 0;
	plan->fd = -1;
	plan->relpath[0] = '\0';
	memset(&plan->meta, 0, sizeof(plan->meta));
}

static void plan_drop_fd(struct response_plan *plan)
{
	if (plan->fd >= 0)
		close(plan->fd);
	plan->fd = -1;
}

/* Head plus the small HTML body of an error or redirect. */
static int render_status(struct response_plan *plan, int status,
			 int version_minor, bool head_only,
			 struct http_clock *clock, const char *location,
			 char *buf, size_t cap)
{
	struct http_response r = {
		.status = status,
		.version_minor = version_minor,
		.keep_alive = plan->keep_alive,
		.now = clock->now,
		.clock = clock,
		.server = SERVER_NAME,
		.content_type = "text/html",
		.location = location,
		.allow = status == 405 ? "GET, HEAD" : NULL,
	};
	char body[512];
	size_t blen = http_error_body(status, body, sizeof(body));
	ssize_t n;

	r.content_length = (int64_t)blen;
	n = http_render_head(&r, buf, cap);
	if (n < 0)
		return (int)n;
	if (!head_only) {
		if ((size_t)n + blen > cap)
			return -ENOSPC;
		memcpy(buf + n, body, blen);
		n += (ssize_t)blen;
	}
	plan_drop_fd(plan);
	plan->status = status;
	plan->head_len = (size_t)n;
	plan->body_inline = head_only ? 0 : blen;
	plan->send_file = false;
	return 0;
}

uint64_t respond_body_bytes(const struct response_plan *plan, uint64_t sent)
{
	uint64_t head = plan->head_len - plan->body_inline;

	return sent > head ? sent - head : 0;
}

int respond_error(const struct orcd_config *cfg, int status, bool head_only,
		  struct http_clock *clock, char *buf, size_t cap,
		  struct response_plan *plan)
{
	(void)cfg;
	plan_init(plan, false);
	return render_status(plan, status, 1, head_only, clock, NULL, buf,
			     cap);
}

int respond_status(const struct http_request *req, int status,
		   struct http_clock *clock, char *buf, size_t cap,
		   struct response_plan *plan)
{
	plan_init(plan, req->keep_alive);
	return render_status(plan, status, req->version_minor,
			     req->method == HTTP_METHOD_HEAD, clock, NULL, buf,
			     cap);
}

static int lookup_status(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
	case -ELOOP: /* RESOLVE_NO_MAGICLINKS, link loops */
	case -EXDEV: /* escapes the root (RESOLVE_BENEATH) */
	case -ENAMETOOLONG:
	case -ENXIO:  /* a socket's open: it is no file to serve */
	case -ENODEV: /* a device node without a driver */
		return 404;
	case -EACCES:
	case -EPERM:
		return 403;
	case -EMFILE: /* out of descriptors for now: try again */
	case -ENFILE:
		return 503;
	default:
		return 500;
	}
}

/* The facts of plan->relpath: from lk, or a lookup (O_PATH) of our own;
 * with fdp, a regular file is also opened for reading (the one open it
 * costs on an engine that sends from the plan's fd). Nothing the lookup
 * found to be another kind is opened (file_meta_lookup): a directory
 * goes on to its redirect or index, any other kind is answered 404, and
 * neither a FIFO's writer nor a device's driver sees a read open, unless
 * a rename puts one in the file's place between the lookup and the open
 * (as it could before any engine's open of a planned file). */
static int lookup(struct orcd_config *cfg, const struct respond_lookup *lk,
		  int *fdp, struct response_plan *plan)
{
	if (!fdp && lk)
		return lk->fn(lk->ctx, cfg, plan->relpath, &plan->meta);
	return file_meta_lookup(cfg->root_fd, plan->relpath, 0, &plan->meta,
				fdp);
}

/* Whether the answer may carry none of the file's bytes: a HEAD, an
 * empty file, or a precondition or range that can turn it into a 304,
 * 412 or 416. */
static bool may_send_no_bytes(const struct http_request *req,
			      const struct file_meta *meta)
{
	return req->method == HTTP_METHOD_HEAD || meta->size == 0 ||
	       req->if_match.n || req->if_unmodified_since.n ||
	       req->if_none_match.n || req->if_modified_since.n ||
	       req->range.n;
}

/* Resolve the normalised path to a regular file, following the index file
 * for directories. Returns 0 or an HTTP status (with *location for 301). */
static int resolve_target(struct orcd_config *cfg,
			  const struct respond_lookup *lk,
			  const struct http_request *req, bool trailing,
			  unsigned flags, struct response_plan *plan,
			  char **location, size_t loccap)
{
	int *fdp = (flags & RESPOND_KEEP_FD) ? &plan->fd : NULL;
	int err = lookup(cfg, lk, fdp, plan);
	size_t len;

	if (err)
		return lookup_status(err);
	if (S_ISDIR(plan->meta.mode)) {
		plan_drop_fd(plan);
		if (!trailing) {
			/* The browser must resolve relative links against the
			 * directory, so redirect to the slash form, with the
			 * query as nginx keeps it. From the normalised path:
			 * the raw "//evil.example/.." would send the browser
			 * to evil.example. */
			if (path_dir_location(plan->relpath, req->query.p,
					      req->query.n, *location,
					      loccap) >= 0)
				return 301;
			/* Longer than the caller's buffer: memory of its
			 * own, for the most every byte escaped can take. */
			loccap = 3 * (strlen(plan->relpath) + req->query.n) + 3;
			*location = malloc(loccap);
			if (!*location)
				return 503;
			if (path_dir_location(plan->relpath, req->query.p,
					      req->query.n, *location,
					      loccap) < 0)
				return 500;
			return 301;
		}
		len = strlen(plan->relpath);
		if (len + strlen(cfg->index) + 2 > sizeof(plan->relpath))
			return 404;
		snprintf(plan->relpath + len, sizeof(plan->relpath) - len,
			 "%s%s", len ? "/" : "", cfg->index);
		err = lookup(cfg, lk, fdp, plan);
		if (err)
			return lookup_status(err);
	} else if (trailing) {
		/* "/file.html/" names a directory that is not one. */
		return 404;
	}
	if (!S_ISREG(plan->meta.mode))
		return 404;
	if (!fdp && may_send_no_bytes(req, &plan->meta)) {
		/* The O_PATH lookup needs no read permission, and an answer
		 * without the file's bytes has no open that would find out:
		 * ask (a cache may know) or open it here, so that it is 403
		 * wherever a transfer's would be, before any precondition or
		 * range could say what the file is. */
		int fd;

		if (lk && lk->readable) {
			err = lk->readable(lk->ctx, cfg, plan->relpath,
					   &plan->meta);
		} else {
			err = file_meta_lookup(cfg->root_fd, plan->relpath, 0,
					       &plan->meta, &fd);
			if (!err && fd >= 0)
				close(fd);
		}
		if (err)
			return lookup_status(err);
		/* The facts now are the opened file's: a path replaced by a
		 * directory, FIFO or device since the lookup above is no
		 * file to answer from. */
		if (!S_ISREG(plan->meta.mode))
			return 404;
	}
	return 0;
}

int respond_plan(struct orcd_config *cfg, const struct respond_lookup *lk,
		 const struct http_request *req, struct http_clock *clock,
		 unsigned flags, char *buf, size_t cap,
		 struct response_plan *plan)
{
	bool head = req->method == HTTP_METHOD_HEAD;
	/* Most Locations fit here; a longer one is allocated, and is 414
	 * only when its head does not fit the response buffer (http1.c
	 * sizes that for any request line the parser accepts). */
	char loc_buf[2048], *location = loc_buf, etag[HTTP_ETAG_MAX];
	uint64_t first = 0, last = 0;
	enum http_range_result rr = HTTP_RANGE_NONE;
	bool trailing = false;
	int status, err;
	ssize_t n;

	plan_init(plan, req->keep_alive);
	if (req->method > HTTP_METHOD_HEAD) {
		/* 405 for a method a file does not allow, 501 for one orcd
		 * does not know (RFC 9110 15.5.6, 15.6.2). We never read a
		 * request body: if one follows, the stream cannot be
		 * resynchronised, so close after answering. */
		status = req->method == HTTP_METHOD_OTHER ? 405 : 501;
		if (req->has_content_length && req->content_length)
			plan->keep_alive = false;
		return render_status(plan, status, req->version_minor, false,
				     clock, NULL, buf, cap);
	}
	err = path_normalize(req->path.p, req->path.n, plan->relpath,
			     sizeof(plan->relpath), &trailing);
	if (err) {
		status = err == -ENOENT	      ? 404 :
			 err == -ENAMETOOLONG ? 414 :
						400;
		if (status == 400)
			plan->keep_alive = false;
		return render_status(plan, status, req->version_minor, head,
				     clock, NULL, buf, cap);
	}
	status = resolve_target(cfg, lk, req, trailing, flags, plan, &location,
				sizeof(loc_buf));
	if (status) {
		err = render_status(plan, status, req->version_minor, head,
				    clock, status == 301 ? location : NULL, buf,
				    cap);
		if (err == -ENOSPC && status == 301)
			err = render_status(plan, 414, req->version_minor, head,
					    clock, NULL, buf, cap);
		if (location != loc_buf)
			free(location);
		return err;
	}

	http_etag_make(plan->meta.ino, plan->meta.size, plan->meta.mtime_sec,
		       plan->meta.mtime_nsec, etag);
	/* RFC 9110 8.8.2.1: Last-Modified is never later than Date; a file
	 * from the future is dated now, and validated as of now. */
	time_t now = clock->now, lm = (time_t)plan->meta.mtime_sec;

	if (lm > now)
		lm = now;
	status = http_precondition(req, etag, lm);
	if (status == 412)
		return render_status(plan, status, req->version_minor, head,
				     clock, NULL, buf, cap);
	struct http_response r = {
		.status = status,
		.version_minor = req->version_minor,
		.keep_alive = plan->keep_alive,
		.now = now,
		.clock = clock,
		.server = SERVER_NAME,
		.content_type = mime_lookup(cfg->mime, plan->relpath,
					    cfg->default_type),
		.last_modified = lm,
		.has_last_modified = true,
		.etag = etag,
		.accept_ranges = true,
	};

	if (r.status == 200 && http_range_applies(req, etag, r.last_modified))
		rr = http_range_parse(req->range, plan->meta.size, &first,
				      &last);
	plan->offset = 0;
	plan->length = plan->meta.size;
	if (r.status == 304) {
		r.content_type = NULL;
		r.content_length = -1;
		plan->length = 0;
	} else if (rr == HTTP_RANGE_OK) {
		r.status = 206;
		r.content_range = true;
		r.range_first = first;
		r.range_last = last;
		r.range_total = plan->meta.size;
		plan->offset = first;
		plan->length = last - first + 1;
		r.content_length = (int64_t)plan->length;
	} else if (rr == HTTP_RANGE_UNSATISFIABLE) {
		char body[512];
		size_t blen = http_error_body(416, body, sizeof(body));

		r.status = 416;
		r.range_unsatisfied = true;
		r.range_total = plan->meta.size;
		r.content_type = "text/html";
		r.content_length = (int64_t)blen;
		plan_drop_fd(plan);
		n = http_render_head(&r, buf, cap);
		if (n < 0 || (!head && (size_t)n + blen > cap))
			return -ENOSPC;
		if (!head)
			memcpy(buf + n, body, blen);
		plan->status = 416;
		plan->head_len = (size_t)n + (head ? 0 : blen);
		plan->body_inline = head ? 0 : blen;
		return 0;
	} else {
		r.content_length = (int64_t)plan->meta.size;
	}
	n = http_render_head(&r, buf, cap);
	if (n < 0) {
		plan_drop_fd(plan);
		return (int)n;
	}
	plan->status = r.status;
	plan->head_len = (size_t)n;
	plan->send_file = !head && r.status != 304 && plan->length > 0;
	if (!plan->send_file)
		plan_drop_fd(plan);
	return 0;
}
