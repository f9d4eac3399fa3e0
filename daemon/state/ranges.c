/* SPDX-License-Identifier: MIT */
/* ranges.c: a first-fit allocator of ranges in a space of granules, pure data (no fds). */
#include "ranges.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

struct range_node {
	uint64_t start, len;
	uint64_t longest; /* the longest len in this subtree */
	uint32_t prio;
	struct range_node *left, *right;
};

static uint32_t next_prio(struct ranges *r)
{
	/* xorshift64: priorities only need to be unpredictable to the shape of the input. */
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return (uint32_t)(r->rng >> 32);
}

static uint64_t longest(const struct range_node *t)
{
	return t ? t->longest : 0;
}

static void update(struct range_node *t)
{
	uint64_t l = longest(t->left), r = longest(t->right);

	t->longest = t->len;
	if (l > t->longest)
		t->longest = l;
	if (r > t->longest)
		t->longest = r;
}

/* split cuts t into the nodes starting below key (*a) and the others (*b). */
static void split(struct range_node *t, uint64_t key, struct range_node **a, struct range_node **b)
{
	if (!t) {
		*a = *b = NULL;
	} else if (t->start < key) {
		split(t->right, key, &t->right, b);
		update(t);
		*a = t;
	} else {
		split(t->left, key, a, &t->left);
		update(t);
		*b = t;
	}
}

/* merge joins a and b, every start in a below every start in b. */
static struct range_node *merge(struct range_node *a, struct range_node *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio >= b->prio) {
		a->right = merge(a->right, b);
		update(a);
		return a;
	}
	b->left = merge(a, b->left);
	update(b);
	return b;
}

static struct range_node *node_new(struct ranges *r, uint64_t start, uint64_t len)
{
	struct range_node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->start = start;
	n->len = n->longest = len;
	n->prio = next_prio(r);
	return n;
}

static void free_tree(struct range_node *t)
{
	while (t) {
		struct range_node *right = t->right;

		free_tree(t->left);
		free(t);
		t = right;
	}
}

int ranges_init(struct ranges *r, uint64_t granules)
{
	*r = (struct ranges){.granules = granules, .rng = 0x9e3779b97f4a7c15ull ^ granules};
	if (granules == 0)
		return -EINVAL;
	r->root = node_new(r, 0, granules);
	if (!r->root)
		return -ENOMEM;
	r->free = granules;
	r->count = 1;
	return 0;
}

void ranges_finish(struct ranges *r)
{
	free_tree(r->root);
	r->root = NULL;
	r->free = r->count = 0;
}

static void each(const struct range_node *t, void (*fn)(void *, uint64_t, uint64_t), void *ctx)
{
	for (; t; t = t->right) {
		each(t->left, fn, ctx);
		fn(ctx, t->start, t->len);
	}
}

void ranges_each(const struct ranges *r, void (*fn)(void *ctx, uint64_t start, uint64_t n),
		 void *ctx)
{
	each(r->root, fn, ctx);
}

uint64_t ranges_largest(const struct ranges *r)
{
	return longest(r->root);
}

/* first_fit finds the lowest-starting node at least n long (the tree's longest is >= n). */
static const struct range_node *first_fit(const struct range_node *t, uint64_t n)
{
	while (t) {
		if (longest(t->left) >= n)
			t = t->left;
		else if (t->len >= n)
			return t;
		else
			t = t->right;
	}
	return NULL;
}

/* take_node cuts the node starting at key out of r's tree: *lo and *hi keep the rest. */
static struct range_node *take_node(struct ranges *r, uint64_t key, struct range_node **lo,
				    struct range_node **hi)
{
	struct range_node *mid;

	split(r->root, key, lo, &mid);
	split(mid, key + 1, &mid, hi);
	r->root = NULL;
	return mid;
}

int ranges_alloc(struct ranges *r, uint64_t n, uint64_t *start)
{
	const struct range_node *fit;
	struct range_node *lo, *hi, *m;

	if (n == 0)
		return -EINVAL;
	if (longest(r->root) < n)
		return -ENOSPC;
	fit = first_fit(r->root, n);
	m = take_node(r, fit->start, &lo, &hi);
	*start = m->start;
	m->start += n;
	m->len -= n;
	m->longest = m->len;
	if (m->len == 0) {
		free(m);
		m = NULL;
		r->count--;
	}
	r->free -= n;
	r->root = merge(merge(lo, m), hi);
	return 0;
}

static struct range_node *rightmost(struct range_node *t)
{
	while (t && t->right)
		t = t->right;
	return t;
}

static struct range_node *leftmost(struct range_node *t)
{
	while (t && t->left)
		t = t->left;
	return t;
}

/* join_back puts the pieces of a free or claim back in order into r's tree. */
static void join_back(struct ranges *r, struct range_node *a, struct range_node *p,
		      struct range_node *m, struct range_node *s, struct range_node *b)
{
	r->root = merge(merge(merge(a, p), merge(m, s)), b);
}

int ranges_free(struct ranges *r, uint64_t start, uint64_t n)
{
	struct range_node *a, *b, *p = NULL, *s = NULL, *m = NULL;
	bool join_p, join_s;

	if (n == 0 || start >= r->granules || n > r->granules - start)
		return -EINVAL;
	split(r->root, start, &a, &b);
	if (rightmost(a))
		split(a, rightmost(a)->start, &a, &p);
	if (leftmost(b))
		split(b, leftmost(b)->start + 1, &s, &b);
	/* Wholly taken: the free neighbours end before it and start after it. */
	if ((p && p->start + p->len > start) || (s && s->start < start + n)) {
		join_back(r, a, p, NULL, s, b);
		return -EINVAL;
	}
	join_p = p && p->start + p->len == start;
	join_s = s && s->start == start + n;
	if (join_p) {
		p->len += n + (join_s ? s->len : 0);
		update(p);
	} else if (join_s) {
		s->start = start;
		s->len += n;
		update(s);
	} else {
		m = node_new(r, start, n);
		if (!m) {
			join_back(r, a, p, NULL, s, b);
			return -ENOMEM;
		}
		r->count++;
	}
	if (join_p && join_s) {
		free(s);
		s = NULL;
		r->count--;
	}
	r->free += n;
	join_back(r, a, p, m, s, b);
	return 0;
}

int ranges_claim(struct ranges *r, uint64_t start, uint64_t n)
{
	struct range_node *a, *b, *p = NULL, *tail = NULL;
	uint64_t end;

	if (n == 0 || start >= r->granules || n > r->granules - start)
		return -ERANGE;
	end = start + n;
	split(r->root, start + 1, &a, &b);
	if (rightmost(a))
		split(a, rightmost(a)->start, &a, &p);
	if (!p || p->start + p->len < end) {
		join_back(r, a, p, NULL, NULL, b);
		return -EBUSY;
	}
	if (p->start + p->len > end) {
		tail = node_new(r, end, p->start + p->len - end);
		if (!tail) {
			join_back(r, a, p, NULL, NULL, b);
			return -ENOMEM;
		}
		r->count++;
	}
	p->len = start - p->start;
	update(p);
	if (p->len == 0) {
		free(p);
		p = NULL;
		r->count--;
	}
	r->free -= n;
	join_back(r, a, p, tail, NULL, b);
	return 0;
}

/* check_tree checks t's subtree within (lo, hi) of starts; adds its free granules and nodes. */
static int check_tree(const struct range_node *t, uint64_t lo, uint64_t hi, uint32_t prio,
		      uint64_t *sum, uint64_t *count)
{
	uint64_t want;

	if (!t)
		return 0;
	if (t->len == 0 || t->start < lo || t->start + t->len > hi || t->prio > prio)
		return -EFAULT;
	/* Coalesced: a free range never touches the next one (strictly inside the bounds). */
	if ((lo > 0 && t->start == lo) || t->start + t->len == hi)
		return -EFAULT;
	want = t->len;
	if (longest(t->left) > want)
		want = longest(t->left);
	if (longest(t->right) > want)
		want = longest(t->right);
	if (t->longest != want)
		return -EFAULT;
	*sum += t->len;
	(*count)++;
	if (check_tree(t->left, lo, t->start, t->prio, sum, count) < 0)
		return -EFAULT;
	return check_tree(t->right, t->start + t->len, hi, t->prio, sum, count);
}

int ranges_check(const struct ranges *r)
{
	uint64_t sum = 0, count = 0;

	/* Bounds are exclusive of touching: start the space one below 0 by treating lo 0 as open.
	 */
	if (check_tree(r->root, 0, r->granules + 1, UINT32_MAX, &sum, &count) < 0)
		return -EFAULT;
	if (sum != r->free || count != r->count || r->free > r->granules)
		return -EFAULT;
	return 0;
}
