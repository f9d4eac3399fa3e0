/* SPDX-License-Identifier: MIT */
/* explain.c: why a request is not granted now, in the words the client and the log get. */
#include "explain.h"

#include <stdio.h>

#include "client.h"
#include "residency.h"
#include "server.h"
#include "size.h"

/* holders writes who holds memory on a device, largest first: "pid 1 'a' 64 MiB, ...". */
static void holders(const struct arbiter *a, unsigned dev, char *buf, size_t len)
{
	enum { TOP = 3 };
	const struct client *top[TOP] = {NULL};
	const struct client *c;
	uint64_t rest_bytes = 0;
	unsigned rest = 0;
	size_t used = 0;

	TAILQ_FOREACH (c, &a->server->clients, link) {
		uint64_t bytes = c->device_bytes[dev];
		const struct client *out = c;

		if (bytes == 0)
			continue;
		/* Insert into the top list; whatever falls off its end counts as "others". */
		for (unsigned i = 0; i < TOP && out; i++) {
			if (!top[i] || out->device_bytes[dev] > top[i]->device_bytes[dev]) {
				const struct client *t = top[i];

				top[i] = out;
				out = t;
			}
		}
		if (out) {
			rest++;
			rest_bytes += out->device_bytes[dev];
		}
	}
	buf[0] = '\0';
	for (unsigned i = 0; i < TOP && top[i]; i++) {
		char label[128], size[SIZE_FORMAT_MAX];
		int n = snprintf(buf + used, len - used, "%s%s %s", i ? ", " : "",
				 client_label(top[i], label, sizeof(label)),
				 size_format(top[i]->device_bytes[dev], size, sizeof(size)));

		if (n < 0 || (size_t)n >= len - used)
			return;
		used += (size_t)n;
	}
	if (rest) {
		char size[SIZE_FORMAT_MAX];

		snprintf(buf + used, len - used, " and %u other client(s) %s", rest,
			 size_format(rest_bytes, size, sizeof(size)));
	}
	if (!top[0])
		snprintf(buf, len, "no client");
}

void explain_refusal(const struct arbiter *a, const struct device *d, uint64_t requested,
		     uint64_t size, unsigned ahead, char *buf, size_t len)
{
	char req[SIZE_FORMAT_MAX], rounded[SIZE_FORMAT_MAX], gran[SIZE_FORMAT_MAX];
	char fr[SIZE_FORMAT_MAX], bud[SIZE_FORMAT_MAX], who[512], round_note[96] = "";
	char queue_note[64] = "", freeing_note[64] = "", rel[SIZE_FORMAT_MAX];

	if (requested != size)
		snprintf(round_note, sizeof(round_note), " (%s in %s granules)",
			 size_format(size, rounded, sizeof(rounded)),
			 size_format(d->granule, gran, sizeof(gran)));
	if (ahead)
		snprintf(queue_note, sizeof(queue_note), "; %u earlier request(s) wait ahead",
			 ahead);
	if (d->releasing || residency_evicting_bytes(d))
		snprintf(freeing_note, sizeof(freeing_note), "; %s is being freed",
			 size_format(d->releasing + residency_evicting_bytes(d), rel, sizeof(rel)));
	holders(a, d->index, who, sizeof(who));
	snprintf(buf, len,
		 "requested %s%s on device %u (%s): %s of its %s budget is free%s%s; held by %s",
		 size_format(requested, req, sizeof(req)), round_note, d->index, d->name,
		 size_format(device_free(d), fr, sizeof(fr)),
		 size_format(d->budget, bud, sizeof(bud)), freeing_note, queue_note, who);
}
