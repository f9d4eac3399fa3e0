/* SPDX-License-Identifier: MIT */
/*
 * config.c: the allocator's settings: the lease size small tensors share, the empty lease kept,
 * how long a lease request may wait, and the calling thread's model; from the environment
 * once, then from the setters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "books.h"
#include "config.h"
#include "size.h"

#define MiB (UINT64_C(1) << 20)
#define GRANULE (2 * MiB) /* the daemon grants in 2 MiB granules */
#define DEFAULT_CHUNK (64 * MiB)
#define MAX_CHUNK (UINT64_C(1) << 40)
#define DEFAULT_TIMEOUT_MS 30000

/* The sizes, under books_lock; the timeout, atomic. */
static uint64_t chunk_bytes = DEFAULT_CHUNK, keep_bytes = DEFAULT_CHUNK;
static bool keep_set;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static _Atomic int64_t timeout_ms = DEFAULT_TIMEOUT_MS;

static _Thread_local uint64_t thread_model;

/* parse_size reads a size by the rule of every rocmmem tool (common/size.c: "64M", "0.9G",
 * truncated to whole bytes), at most MAX_CHUNK. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t v;
	int err = size_parse(s, &v);

	if (err)
		return err;
	if (v > MAX_CHUNK)
		return -ERANGE;
	*out = v;
	return 0;
}

uint64_t config_round_granule(uint64_t n)
{
	return (n + GRANULE - 1) & ~(GRANULE - 1);
}

/* config_read takes the environment's settings once; later calls of the setters win. */
static void config_read(void)
{
	const char *v;
	uint64_t n;

	pthread_mutex_lock(&books_lock);
	v = getenv("ROCMMEM_TORCH_CHUNK_SIZE");
	if (v && parse_size(v, &n) == 0 && n > 0)
		chunk_bytes = config_round_granule(n);
	v = getenv("ROCMMEM_TORCH_KEEP_EMPTY");
	if (v && parse_size(v, &n) == 0) {
		keep_bytes = n;
		keep_set = true;
	}
	if (!keep_set)
		keep_bytes = chunk_bytes;
	pthread_mutex_unlock(&books_lock);
	v = getenv("ROCMMEM_TORCH_TIMEOUT");
	if (v && *v) {
		char *end;
		double s = strtod(v, &end);

		if (end != v && *end == '\0')
			atomic_store(&timeout_ms, s < 0 ? -1 : (int64_t)(s * 1000));
	}
}

void config_init(void)
{
	pthread_once(&config_once, config_read);
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_timeout(int64_t ms)
{
	config_init();
	atomic_store(&timeout_ms, ms < 0 ? -1 : ms);
	return 0;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_chunk_size(uint64_t bytes)
{
	if (bytes > MAX_CHUNK)
		return -EINVAL;
	config_init();
	pthread_mutex_lock(&books_lock);
	chunk_bytes = bytes ? config_round_granule(bytes) : DEFAULT_CHUNK;
	if (!keep_set)
		keep_bytes = chunk_bytes;
	pthread_mutex_unlock(&books_lock);
	return 0;
}

ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_keep_empty(uint64_t bytes)
{
	config_init();
	pthread_mutex_lock(&books_lock);
	keep_bytes = bytes;
	keep_set = true;
	pthread_mutex_unlock(&books_lock);
	return 0;
}

uint64_t config_chunk_bytes(void)
{
	return chunk_bytes;
}

uint64_t config_keep_bytes(void)
{
	return keep_bytes;
}

int64_t config_timeout_ms(void)
{
	return atomic_load(&timeout_ms);
}

ROCMMEM_TORCH_EXPORT uint64_t rocmmem_torch_set_model(uint64_t model_id)
{
	uint64_t old = thread_model;

	thread_model = model_id;
	return old;
}

ROCMMEM_TORCH_EXPORT uint64_t rocmmem_torch_get_model(void)
{
	return thread_model;
}
