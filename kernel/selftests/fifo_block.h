/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An openat2(2) at a chosen fd that sleeps: a thread opens a FIFO with no
 * writer for reading with O_SPECIFIC_FD, so that the wanted fd stays
 * reserved (counted open, nothing installed) until a writer comes.
 */
#ifndef FIFO_BLOCK_H
#define FIFO_BLOCK_H

#include <pthread.h>
#include <sys/types.h>

struct fifo_block {
	char path[4200];
	int want;	/* the fd the sleeping openat2 reserves */
	int result;	/* its return value, -2 while it runs */
	int err;	/* its errno */
	pid_t tid;
	pthread_t th;
};

/*
 * Make a FIFO in a fresh directory and start the open at @want; return
 * once the thread sleeps inside openat2(2). TAP_PASS, or TAP_FAIL with a
 * diagnostic printed (the open may then have returned: see @b->result).
 */
int fifo_block_start(struct fifo_block *b, int want);
/* Open the FIFO for writing, join the thread; the writer's fd or -1. */
int fifo_block_finish(struct fifo_block *b);

#endif /* FIFO_BLOCK_H */
