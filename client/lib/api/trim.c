/* SPDX-License-Identifier: MIT */
/* trim.c: asking the daemon to return its runtime's cached memory to the driver. */
#include <errno.h>

#include "base/error.h"
#include "conn/client.h"

ROCMMEM_EXPORT int rocmmem_trim(rocmmem_client *c, rocmmem_device_index device, uint64_t *released)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__TrimRequest req = ROCMMEM__WIRE__TRIM_REQUEST__INIT;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	if (!c)
		return error_set(-EINVAL, "rocmmem_trim needs a client");
	if (device != ROCMMEM_ALL_DEVICES) {
		req.has_device = true;
		req.device = device;
	}
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM;
	msg.trim = &req;
	/* Trimming waits on the GPU runtime: allow it more than the usual grace. */
	err = conn_call(c, &msg, 6 * CONN_REPLY_GRACE_MS, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_TRIM) {
		inmsg_free(m);
		return error_set(-EPROTO, "the daemon answered a trim with something else");
	}
	if (released)
		*released = r->trim->bytes_trimmed;
	inmsg_free(m);
	return 0;
}
