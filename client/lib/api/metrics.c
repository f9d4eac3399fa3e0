/* SPDX-License-Identifier: MIT */
/* metrics.c: the daemon's metrics in the Prometheus text exposition format. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "conn/client.h"

ROCMMEM_EXPORT int rocmmem_metrics(rocmmem_client *c, char **text)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__MetricsRequest req = ROCMMEM__WIRE__METRICS_REQUEST__INIT;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	if (!text)
		return error_set(-EINVAL, "rocmmem_metrics needs somewhere to store the text");
	*text = NULL;
	if (!c)
		return error_set(-EINVAL, "rocmmem_metrics needs a client");
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_METRICS;
	msg.metrics = &req;
	err = conn_call(c, &msg, CONN_REPLY_GRACE_MS, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_METRICS || !r->metrics->text) {
		inmsg_free(m);
		return error_set(-EPROTO, "the daemon answered a metrics request with something "
					  "else");
	}
	*text = strdup(r->metrics->text);
	inmsg_free(m);
	if (!*text)
		return error_set(-ENOMEM, "out of memory copying the metrics");
	return 0;
}
