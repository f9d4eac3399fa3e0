/* SPDX-License-Identifier: MIT */
/* model_host.c: a model-owning host for the CLI tests: registers models, answers evictions. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "rocmmem.h"
#include "size.h"

/*
 * Usage: model_host SOCKET [--no-ack] [--in-use NAME]... [--timeout SECONDS]
 *                   NAME:CLASS:SIZE[:PRIORITY[:pinned]]...
 *
 * Registers each model, acquires it (waiting up to --timeout, default 30 s) and releases it
 * again (unless --in-use names it), so that it is resident and idle; then prints
 * "registered NAME ID". Afterwards it serves events until SIGTERM or SIGINT (exit 0) or until
 * the daemon goes away (exit 3), printing one line per event:
 *   evict NAME           an evict request arrived
 *   released NAME        ... for a model in use (maximum hold, a forced eviction): released
 *                        first, as a host asked to give it back does (not with --no-ack)
 *   acked NAME           ... and was acked (not with --no-ack)
 *   ack-failed NAME ERR  ... the ack was refused
 *   revoked NAME         the daemon took the model's memory back
 *   disconnected         the connection ended
 * Every line is flushed at once: the tests read them while the host runs.
 * Exit status: 0 stopped by a signal, 1 usage, 2 a request refused, 3 the daemon went away.
 */

#define HOST_MAX_MODELS 16

struct host_model {
	char name[65];
	uint64_t id;
	bool in_use;
};

struct host {
	bool ack;
	bool gone;
	size_t n;
	struct host_model models[HOST_MAX_MODELS];
};

static struct host_model *host_model_of(struct host *h, uint64_t id)
{
	for (size_t i = 0; i < h->n; i++) {
		if (h->models[i].id == id)
			return &h->models[i];
	}
	return NULL;
}

static void host_event(rocmmem_client *c, const struct rocmmem_event *ev, void *userdata)
{
	struct host *h = userdata;
	struct host_model *m = host_model_of(h, ev->model_id);
	const char *name = m ? m->name : "?";
	int err;

	switch (ev->type) {
	case ROCMMEM_EVENT_EVICT_REQUEST:
		printf("evict %s\n", name);
		if (h->ack && m && m->in_use) {
			err = rocmmem_model_release(c, m->id);
			printf("%s %s\n", err ? "release-failed" : "released", name);
			m->in_use = err != 0;
		}
		if (h->ack) {
			err = rocmmem_model_evict_ack(c, ev->model_id);
			if (err)
				printf("ack-failed %s %s\n", name, rocmmem_strerror(err));
			else
				printf("acked %s\n", name);
		}
		break;
	case ROCMMEM_EVENT_MODEL_REVOKED:
		printf("revoked %s\n", name);
		break;
	case ROCMMEM_EVENT_DISCONNECTED:
		printf("disconnected\n");
		h->gone = true;
		break;
	default:
		break;
	}
	fflush(stdout);
}

static int host_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int host_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "model_host: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nUsage: model_host SOCKET [--no-ack] [--in-use NAME]... "
			"[--timeout SECONDS] NAME:CLASS:SIZE[:PRIORITY[:pinned]]...\n");
	return 1;
}

static int host_class(const char *text, enum rocmmem_model_class *out)
{
	static const char *const names[] = {"other", "transformer", "vae", "text_encoder",
					    "image_encoder"};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(text, names[i]) == 0) {
			*out = (enum rocmmem_model_class)i;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * host_parse_spec reads NAME:CLASS:SIZE[:PRIORITY[:pinned]] into desc (the name points into
 * spec, which is cut into fields). An empty PRIORITY is 0.
 */
static int host_parse_spec(char *spec, struct rocmmem_model_desc *desc)
{
	char *fields[5] = {0}, *end;
	unsigned n = 0;
	long prio;

	for (char *f = spec; f; n++) {
		if (n == 5)
			return -EINVAL;
		fields[n] = f;
		f = strchr(f, ':');
		if (f)
			*f++ = '\0';
	}
	if (n < 3 || !fields[0][0] || host_class(fields[1], &desc->model_class) < 0 ||
	    size_parse(fields[2], &desc->size) < 0)
		return -EINVAL;
	desc->name = fields[0];
	if (n >= 4 && fields[3][0]) {
		errno = 0;
		prio = strtol(fields[3], &end, 10);
		if (errno || *end || prio < INT32_MIN || prio > INT32_MAX)
			return -EINVAL;
		desc->priority = (int32_t)prio;
	}
	if (n == 5) {
		if (strcmp(fields[4], "pinned") != 0)
			return -EINVAL;
		desc->pinned = 1;
	}
	return 0;
}

/* host_serve handles events until a signal (0) or the end of the connection (3). */
static int host_serve(rocmmem_client *c, struct host *h, int sigfd)
{
	for (;;) {
		struct pollfd fds[2] = {
		    {.fd = sigfd, .events = POLLIN},
		    {.fd = rocmmem_event_fd(c), .events = POLLIN},
		};

		if (h->gone)
			return 3;
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("model_host: poll");
			return 3;
		}
		if (fds[0].revents & POLLIN)
			return 0;
		if (fds[1].revents && rocmmem_dispatch(c) < 0)
			return 3;
	}
}

int main(int argc, char **argv)
{
	static struct host h = {.ack = true};
	const char *in_use[HOST_MAX_MODELS];
	size_t nin_use = 0;
	int64_t timeout_ms = 30000;
	rocmmem_client *c = NULL;
	sigset_t mask;
	int i, err, rc, sigfd;

	if (argc < 2)
		return host_usage("missing SOCKET");
	/* Blocked from the start, so that SIGTERM right after a line is read ends it cleanly. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sigfd < 0) {
		perror("model_host: signalfd");
		return 1;
	}
	for (i = 2; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--no-ack") == 0) {
			h.ack = false;
		} else if (strcmp(argv[i], "--in-use") == 0 && i + 1 < argc &&
			   nin_use < HOST_MAX_MODELS) {
			in_use[nin_use++] = argv[++i];
		} else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			if (duration_parse(argv[++i], &timeout_ms) < 0)
				return host_usage("invalid --timeout '%s'", argv[i]);
		} else {
			return host_usage("unknown option '%s'", argv[i]);
		}
	}
	if (i == argc)
		return host_usage("missing NAME:CLASS:SIZE");
	if (argc - i > HOST_MAX_MODELS)
		return host_usage("too many models (at most %d)", HOST_MAX_MODELS);
	err = rocmmem_connect(argv[1], "model_host", 5000, &c);
	if (err) {
		fprintf(stderr, "model_host: Could not connect: %s\n", rocmmem_last_error());
		return 3;
	}
	rocmmem_set_event_callback(c, host_event, &h);
	for (; i < argc; i++) {
		struct rocmmem_model_desc desc = {.struct_size = sizeof(desc)};
		struct host_model *m = &h.models[h.n];
		char spec[256];

		snprintf(spec, sizeof(spec), "%s", argv[i]);
		if (host_parse_spec(spec, &desc) < 0) {
			rocmmem_disconnect(c);
			return host_usage("invalid model '%s'", argv[i]);
		}
		snprintf(m->name, sizeof(m->name), "%s", desc.name);
		for (size_t k = 0; k < nin_use; k++)
			m->in_use |= strcmp(in_use[k], m->name) == 0;
		err = rocmmem_model_register(c, &desc, &m->id);
		if (err) {
			fprintf(stderr, "model_host: Could not register '%s': %s\n", m->name,
				rocmmem_last_error());
			rocmmem_disconnect(c);
			return 2;
		}
		h.n++;
		err = rocmmem_model_acquire(c, m->id, timeout_ms);
		if (!err && !m->in_use)
			err = rocmmem_model_release(c, m->id);
		if (err) {
			fprintf(stderr, "model_host: Could not make '%s' resident: %s\n", m->name,
				rocmmem_last_error());
			rocmmem_disconnect(c);
			return 2;
		}
		printf("registered %s %" PRIu64 "\n", m->name, m->id);
		fflush(stdout);
	}
	rc = host_serve(c, &h, sigfd);
	rocmmem_disconnect(c);
	close(sigfd);
	return rc;
}
