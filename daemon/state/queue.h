/* SPDX-License-Identifier: MIT */
/* queue.h: a device's first-in first-out queue of lease requests waiting for memory. */
#ifndef ROCMMEMD_QUEUE_H
#define ROCMMEMD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "books.h"
#include "version.h"

void queue_init(struct queue *q);
void queue_push(struct queue *q, struct waiter *w);
void queue_remove(struct queue *q, struct waiter *w);
/* queue_head returns the oldest waiter or NULL. */
struct waiter *queue_head(const struct queue *q);
static inline bool queue_empty(const struct queue *q)
{
	return q->count == 0;
}
/*
 * queue_pass_over counts that w is granted ahead of the waiters between the head and w (the
 * head itself is not passed: a backfill never delays it), at now_ms.
 */
void queue_pass_over(struct queue *q, const struct waiter *w, uint64_t now_ms);
/* queue_position returns how many waiters are ahead of w. */
unsigned queue_position(const struct queue *q, const struct waiter *w);

#endif
