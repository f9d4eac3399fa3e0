/* SPDX-License-Identifier: MIT */
/* named_client.c: a client that picks its own name, takes one lease and gives it back. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "rocmmem.h"
#include "size.h"

/*
 * Usage: named_client SOCKET NAME SIZE
 *
 * Connects as NAME (the name the daemon logs), leases SIZE on device 0 without waiting, prints
 * "leased ID BYTES", releases it and prints "released ID". Exit status: 0 done, 1 usage,
 * 2 a request refused, 3 no daemon.
 */
int main(int argc, char **argv)
{
	struct rocmmem_lease_request req = {.struct_size = sizeof(req)};
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	uint64_t id;
	int err;

	if (argc != 4 || size_parse(argv[3], &req.size) < 0) {
		fprintf(stderr, "Usage: named_client SOCKET NAME SIZE\n");
		return 1;
	}
	err = rocmmem_connect(argv[1], argv[2], 5000, &c);
	if (err) {
		fprintf(stderr, "named_client: Could not connect: %s\n", rocmmem_last_error());
		return err == -EINVAL ? 2 : 3;
	}
	err = rocmmem_lease_acquire(c, &req, &l);
	if (err) {
		fprintf(stderr, "named_client: Could not lease: %s\n", rocmmem_last_error());
		rocmmem_disconnect(c);
		return 2;
	}
	id = rocmmem_lease_id(l);
	printf("leased %" PRIu64 " %" PRIu64 "\n", id, rocmmem_lease_size(l));
	err = rocmmem_lease_release(l);
	if (err) {
		fprintf(stderr, "named_client: Could not release: %s\n", rocmmem_last_error());
		rocmmem_disconnect(c);
		return 2;
	}
	printf("released %" PRIu64 "\n", id);
	rocmmem_disconnect(c);
	return 0;
}
