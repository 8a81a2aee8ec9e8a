// SPDX-License-Identifier: MIT
#include "slots.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int slots_init(struct slots *s, int base, unsigned n)
{
	memset(s, 0, sizeof(*s));
	if (base < 0 || n == 0 || n > (unsigned)INT_MAX - (unsigned)base)
		return -EINVAL;
	s->stack = calloc(n, sizeof(*s->stack));
	s->state = calloc(n, sizeof(*s->state));
	if (!s->stack || !s->state) {
		slots_destroy(s);
		return -ENOMEM;
	}
	s->base = base;
	s->n = n;
	/* Lowest number on top: the first allocations are base, base+1, ...
	 * which keeps a real fd table small and the tests readable. */
	for (unsigned i = 0; i < n; i++)
		s->stack[i] = n - 1 - i;
	s->nfree = n;
	return 0;
}

void slots_destroy(struct slots *s)
{
	free(s->stack);
	free(s->state);
	memset(s, 0, sizeof(*s));
}

int slots_mark_reserved(struct slots *s, int number)
{
	if (!slots_contains(s, number))
		return -ERANGE;
	unsigned off = (unsigned)(number - s->base);

	if (s->state[off] == SLOT_RESERVED)
		return 0;
	if (s->state[off] == SLOT_USED)
		return -EBUSY;
	for (unsigned i = 0; i < s->nfree; i++) {
		if (s->stack[i] != off)
			continue;
		/* Keep the stack's order (lowest on top). */
		memmove(&s->stack[i], &s->stack[i + 1],
			(s->nfree - i - 1) * sizeof(*s->stack));
		s->nfree--;
		break;
	}
	s->state[off] = SLOT_RESERVED;
	s->reserved++;
	return 0;
}

int slots_reserve_open_fds(struct slots *s)
{
	int marked = 0;

	for (unsigned i = 0; i < s->n; i++) {
		int fd = s->base + (int)i;

		if (fcntl(fd, F_GETFD) < 0)
			continue; /* EBADF: not open */
		int r = slots_mark_reserved(s, fd);

		if (r < 0)
			return r;
		marked++;
	}
	return marked;
}

int slots_alloc(struct slots *s)
{
	if (s->nfree == 0) {
		s->waits++;
		return -EAGAIN;
	}
	unsigned off = s->stack[--s->nfree];

	s->state[off] = SLOT_USED;
	if (++s->inuse > s->peak)
		s->peak = s->inuse;
	return s->base + (int)off;
}

int slots_alloc_or_wait(struct slots *s, struct slot_waiter *w)
{
	int r = slots_alloc(s);

	if (r != -EAGAIN)
		return r;
	w->next = NULL;
	w->slot = -1;
	w->queued = true;
	if (s->wait_tail)
		s->wait_tail->next = w;
	else
		s->wait_head = w;
	s->wait_tail = w;
	return -EAGAIN;
}

void slots_cancel_wait(struct slots *s, struct slot_waiter *w)
{
	struct slot_waiter **pp = &s->wait_head, *prev = NULL;

	if (!w->queued)
		return;
	/* Linear, but only walks the queue of the exhausted case. */
	while (*pp && *pp != w) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		*pp = w->next;
		if (s->wait_tail == w)
			s->wait_tail = prev;
	}
	w->next = NULL;
	w->queued = false;
}

struct slot_waiter *slots_free(struct slots *s, int number, int *err)
{
	if (err)
		*err = 0;
	if (!slots_contains(s, number)) {
		if (err)
			*err = -ERANGE;
		return NULL;
	}
	unsigned off = (unsigned)(number - s->base);

	if (s->state[off] != SLOT_USED) {
		if (err)
			*err = -EINVAL;
		return NULL;
	}
	struct slot_waiter *w = s->wait_head;

	if (w) {
		/* Hand over: the slot stays in use, now by the waiter. */
		s->wait_head = w->next;
		if (!s->wait_head)
			s->wait_tail = NULL;
		w->next = NULL;
		w->queued = false;
		w->slot = number;
		return w;
	}
	s->state[off] = SLOT_FREE;
	s->stack[s->nfree++] = off;
	s->inuse--;
	return NULL;
}
