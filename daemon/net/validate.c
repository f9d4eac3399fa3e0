/* SPDX-License-Identifier: MIT */
/* validate.c: the checks on a request that need nothing but the request itself. */
#include "validate.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "net.h"
#include "state/model.h"
#include "text.h"
#include "version.h"

static int no_device(char *why, size_t len, unsigned device, unsigned ndevices)
{
	return text_why(why, len, -ENODEV,
			"no device %u: this daemon manages %u device(s), numbered from 0", device,
			ndevices);
}

/*
 * check_name refuses a name or tag that is not clean text (when given, or always when
 * required: then an empty one too); the message is what, then the rule.
 */
static int check_name(const char *name, bool required, const char *what, char *why, size_t len)
{
	bool bad = required ? !name || !name[0] || !text_is_clean(name, ROCMMEM_NAME_MAX)
			    : name && !text_is_clean(name, ROCMMEM_NAME_MAX);

	if (bad)
		return text_why(why, len, -EINVAL,
				"%s %u bytes of UTF-8 without control characters", what,
				ROCMMEM_NAME_MAX);
	return 0;
}

int validate_hello(const Rocmmem__Wire__Hello *hello, char *why, size_t len)
{
	if (!hello->has_protocol_version)
		return text_why(why, len, -EPROTO, "hello carries no protocol version");
	if (hello->protocol_version != ROCMMEM_PROTOCOL_VERSION)
		return text_why(why, len, -EPROTONOSUPPORT,
				"protocol version %u is not supported: this rocmmemd %s speaks "
				"version %u",
				hello->protocol_version, ROCMMEM_VERSION_STRING,
				ROCMMEM_PROTOCOL_VERSION);
	return check_name(hello->client_name, false, "client name must be at most", why, len);
}

static int lease_acquire(const Rocmmem__Wire__LeaseAcquire *req, unsigned ndevices, char *why,
			 size_t len)
{
	unsigned dev = req->has_device ? req->device : 0;

	if (!req->has_size || req->size == 0)
		return text_why(why, len, -EINVAL, "lease size must be larger than 0");
	if (dev >= ndevices)
		return no_device(why, len, dev, ndevices);
	return check_name(req->tag, false, "lease tag must be at most", why, len);
}

static int model_register(const Rocmmem__Wire__ModelRegister *req, unsigned ndevices, char *why,
			  size_t len)
{
	unsigned dev = req->has_device ? req->device : 0;
	/* protobuf-c stores any int32 in an enum field: out-of-range values arrive as sent. */
	unsigned cls = req->has_class_ ? (unsigned)req->class_ : 0;

	if (dev >= ndevices)
		return no_device(why, len, dev, ndevices);
	if (check_name(req->name, true, "a model needs a name of at most", why, len))
		return -EINVAL;
	if (cls >= MODEL_CLASSES)
		return text_why(why, len, -EINVAL, "unknown model class %u", cls);
	if (req->has_reservation && req->reservation)
		return text_why(why, len, -EINVAL,
				"register takes no reservation: acquire or resize the model");
	return 0;
}

static int subscribe(const Rocmmem__Wire__Subscribe *req, char *why, size_t len)
{
	bool samples = req->has_samples && req->samples;
	bool events = req->has_events && req->events;

	if (!samples && !events)
		return text_why(why, len, -EINVAL,
				"subscribe to samples, events or both (to stop, unsubscribe)");
	if (samples && (!req->has_interval_ms || req->interval_ms < FEED_MIN_INTERVAL_MS ||
			req->interval_ms > FEED_MAX_INTERVAL_MS))
		return text_why(why, len, -EINVAL, "the sample interval must be %u to %u ms",
				FEED_MIN_INTERVAL_MS, FEED_MAX_INTERVAL_MS);
	return 0;
}

int validate_request(const Rocmmem__Wire__ClientMessage *msg, unsigned ndevices, char *why,
		     size_t len)
{
	if (!msg->has_id || msg->id == 0)
		return text_why(why, len, -EPROTO, "request without an id");
	switch (msg->body_case) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY__NOT_SET:
		return text_why(why, len, -EOPNOTSUPP,
				"unknown request type: this rocmmemd %s does not know it",
				ROCMMEM_VERSION_STRING);
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO:
		return validate_hello(msg->hello, why, len);
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE:
		return lease_acquire(msg->lease_acquire, ndevices, why, len);
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE:
		if (!msg->lease_release->has_lease_id)
			return text_why(why, len, -EINVAL, "lease release names no lease id");
		return 0;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER:
		return model_register(msg->model_register, ndevices, why, len);
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE:
		if (!msg->model_resize->has_reservation)
			return text_why(why, len, -EINVAL, "resize needs a reservation in bytes");
		return 0;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE:
		return subscribe(msg->subscribe, why, len);
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM:
		if (msg->trim->has_device && msg->trim->device >= ndevices)
			return no_device(why, len, msg->trim->device, ndevices);
		return 0;
	default:
		/* Model ids, lease ids and timeouts: any value is a question the handler answers.
		 */
		return 0;
	}
}
