/* SPDX-License-Identifier: MIT */
/*
 * The one HTTP/1 connection core every engine runs under: reading and
 * bounding the request head, parsing, planning through respond, keep-
 * alive, pipelining, the per-connection timers (idle, header, send
 * without progress), lingering close, response sequencing and the access
 * log. As nginx's ngx_http_request.c over its event modules, or h2o's
 * lib/http1.c over h2o_socket_t, it never knows how bytes move.
 *
 * Layers call one way:
 *
 *   http1 (this core)  --struct h1_transport-->  engine transport
 *   engine transport   --struct h1_core------->  (back up, by pointer only)
 *
 * An engine embeds a struct h1_conn in each connection and a struct
 * h1_worker in its worker. The core drives the connection through the
 * transport's ops; each op completes exactly once through the matching
 * struct h1_core function, which the engine reaches through
 * orcd_worker.core (set by the server), never by name.
 */
#ifndef ORCD_HTTP1_H
#define ORCD_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "http_parse.h"
#include "mono.h"
#include "respond.h"

struct orcd_worker;
struct orcd_config;
struct h1_conn;

/* How a response ended (h1_transport.respond's completion). */
enum h1_end {
	H1_SENT,   /* every byte of head and body went out */
	H1_REPLAN, /* nothing went out: the file is not what was planned */
	H1_DENIED, /* nothing went out: the open was refused */
	H1_BUSY,   /* nothing went out: no file slot came in time (503) */
	H1_FAILED, /* broke off (client gone, timeout, file shrank): close */
};

/* What an engine does for the core. deadline_ms is mono_ms() time. */
struct h1_transport {
	/* Wait for request bytes until deadline_ms. When they arrive, ask
	 * core->rbuf() where they go, put them there and complete with
	 * core->received(n). Else complete with 0 (peer closed), -ETIMEDOUT,
	 * -ECANCELED (cancel), -EMSGSIZE (the client sent further ahead of
	 * its answers than the transport holds: it gets a graceful close) or
	 * another -errno. */
	void (*recv)(struct h1_conn *c, int64_t deadline_ms);
	/* Send the plan in c->resp: the head_len bytes at the start of its
	 * buffer, then plan.length bytes of the file from plan.offset when
	 * plan.send_file. A send that makes no progress for timeout_ms
	 * fails. Every byte written is added to c->bytes_sent. Completes
	 * with core->responded(end). */
	void (*respond)(struct h1_conn *c, unsigned timeout_ms);
	/* Lingering close: shut down our side for writing (when first),
	 * then read and discard what the client still sends, until
	 * deadline_ms. Completes with core->lingered(n > 0 discarded, or
	 * <= 0: done). */
	void (*linger)(struct h1_conn *c, bool first, int64_t deadline_ms);
	/* Cancel a recv in flight: it completes with -ECANCELED. A linger
	 * in flight ends as at its deadline. */
	void (*cancel)(struct h1_conn *c);
	/* Close the socket and free the connection (the core has released
	 * its part). Nothing completes after this. */
	void (*close)(struct h1_conn *c);
};

/* Output buffer and plan of one response; pooled per worker. */
struct h1_resp {
	struct h1_resp *next;
	struct response_plan plan;
	size_t cap;
	char buf[];
};

/* Connections, newest first (the lists of struct h1_worker). */
struct h1_list {
	struct h1_conn *newest, *oldest;
	unsigned n;
};

/* The core's part of a worker. */
struct h1_worker {
	struct orcd_worker *w;
	const struct h1_transport *tp;
	/* Where plans get file facts (a cache the engine keeps true), and
	 * how to forget a path's when a transfer found them wrong. */
	struct respond_lookup lookup;
	void (*lookup_forget)(void *ctx, const char *relpath);
	/* RESPOND_KEEP_FD: the transport sends from the fd the plan opened;
	 * else it finds the body by plan.relpath itself. */
	unsigned plan_flags;
	/* The transport reads file bytes into the response buffer behind
	 * the head (io_uring chains): the buffer then holds buffer_size,
	 * else only a head. */
	bool bodies_in_buffer;
	/* What shed() closes, oldest first, when the engine has no room
	 * for a new client: connections lingering after their last
	 * response (a courtesy to the client), then those waiting for a
	 * request with nothing buffered (keep-alive, or not one yet). */
	struct h1_list lingering, idle;
	unsigned n_shedding;  /* shed, its recv not back yet */
	int64_t shed_said_ms; /* when the last "no room" warning went out */
	int64_t nomem_said_ms; /* ...and the last "no memory" error */
	unsigned nomem_unsaid; /* buffers refused since that line */
	/* A recv may hand over this many bytes at once (a provided buffer
	 * sized for the max_header_bytes the worker started with): request
	 * buffers are never smaller, whatever a reload set the limit to;
	 * the parser enforces the limit itself (431). */
	size_t in_min;
	bool stopping;	      /* stop accepting, finish what is in flight */
	bool drain_expired;   /* stop's bound passed: abort everything */
	/* Wall clock for Date and the log, per batch (engines set
	 * clock.now); it keeps the head's dates as text. */
	struct http_clock clock;
	/* Pools of request and response buffers, and the bytes each holds
	 * (capped). */
	char *free_ins;
	struct h1_resp *free_resps;
	size_t free_in_bytes, free_resp_bytes;
};

enum h1_state {
	H1_READING,    /* a recv is in flight */
	H1_RESPONDING, /* a respond is in flight */
	H1_LINGERING,  /* a linger is in flight */
};

/* The core's part of a connection. */
struct h1_conn {
	struct h1_worker *hw;
	uint8_t state;
	bool fresh;    /* no request yet on this connection */
	bool have_req; /* req holds the request being answered */
	bool shed;     /* shed() closes it: its recv was cancelled */
	bool last_look; /* stopping: its final recv, for what has come */
	struct h1_list *on; /* hw's idle or lingering list, or NULL */
	struct h1_conn *newer, *older; /* its neighbours there */
	char *in; /* request bytes (NULL while none are buffered) */
	size_t in_len, in_cap;
	struct http_request req;
	/* Where the parse of a head still arriving stopped (zero: none).
	 * req already points into in then: in must not move meanwhile. */
	struct http_parse_state parse;
	struct h1_resp *resp;	 /* the response being sent */
	struct orcd_config *cfg; /* held while a response is planned */
	uint64_t bytes_sent;	 /* this response; the transport adds */
	unsigned replans;
	int64_t hdr_deadline; /* the head must be complete by then */
	int64_t idle_deadline; /* idle_timeout from when it began to wait */
	unsigned blank_bytes; /* empty lines dropped since then */
	int64_t linger_deadline; /* the drain ends unless bytes come */
	int64_t linger_end;	 /* ... and here whatever comes */
	struct sockaddr_storage peer;
};

/* The core's entry points, for engines (through orcd_worker.core). */
struct h1_core {
	void (*worker_init)(struct h1_worker *hw, struct orcd_worker *w,
			    const struct h1_transport *tp);
	void (*worker_fini)(struct h1_worker *hw);
	/* A new connection: start reading its first request. */
	void (*accepted)(struct h1_conn *c, struct h1_worker *hw,
			 const struct sockaddr_storage *peer, socklen_t plen);
	/* Where received bytes go: *cap 0 when there is no memory. */
	void (*rbuf)(struct h1_conn *c, char **buf, size_t *cap);
	void (*received)(struct h1_conn *c, int res);
	void (*responded)(struct h1_conn *c, enum h1_end end);
	void (*lingered)(struct h1_conn *c, int res);
	/* The server began to stop (hw->stopping is set): a connection
	 * waiting for a request goes. */
	void (*stop)(struct h1_conn *c);
	/* Teardown with nothing in flight: release the core's part, no
	 * I/O, no log. */
	void (*discard)(struct h1_conn *c);
	/* The engine has no room for a waiting client (max_connections
	 * reached, or slots short): close the lingering connections (up to
	 * 32; each had its last answer, and the drain is a courtesy), then
	 * the oldest idle ones, as nginx drains its reusable ones (an
	 * eighth of them, 1..32). Only a connection waiting for a request
	 * with no byte of one buffered is idle: nothing in progress is ever
	 * cut, and one whose request races the close is answered instead.
	 * Each goes as at its timeout: its recv or linger is cancelled,
	 * then the socket closes. Returns how many began to close; their
	 * closes complete through the transport as usual. */
	unsigned (*shed)(struct h1_worker *hw);
};

extern const struct h1_core h1_core;

#endif
