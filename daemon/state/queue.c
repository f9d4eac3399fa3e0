/* SPDX-License-Identifier: MIT */
/* queue.c: the FIFO of waiting lease requests; order of arrival is order of grant. */
#include "queue.h"

#include <assert.h>

void queue_init(struct queue *q)
{
	TAILQ_INIT(&q->head);
	q->count = 0;
}

void queue_push(struct queue *q, struct waiter *w)
{
	TAILQ_INSERT_TAIL(&q->head, w, queue_link);
	q->count++;
}

void queue_remove(struct queue *q, struct waiter *w)
{
	assert(q->count > 0);
	TAILQ_REMOVE(&q->head, w, queue_link);
	q->count--;
}

struct waiter *queue_head(const struct queue *q)
{
	return TAILQ_FIRST(&q->head);
}

unsigned queue_position(const struct queue *q, const struct waiter *w)
{
	unsigned n = 0;
	const struct waiter *it;

	TAILQ_FOREACH (it, &q->head, queue_link) {
		if (it == w)
			return n;
		n++;
	}
	return n;
}

void queue_pass_over(struct queue *q, const struct waiter *w, uint64_t now_ms)
{
	struct waiter *it = TAILQ_FIRST(&q->head);

	if (!it || it == w)
		return;
	for (it = TAILQ_NEXT(it, queue_link); it && it != w; it = TAILQ_NEXT(it, queue_link)) {
		if (it->passed++ == 0)
			it->first_passed_ms = now_ms;
	}
}
