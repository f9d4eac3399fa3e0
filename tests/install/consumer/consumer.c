/* SPDX-License-Identifier: MIT */
/* consumer.c: a program built against an installed librocmmem (pkg-config, CMake package). */
#include <rocmmem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* main connects to the daemon at argv[1], leases 4 MiB, writes and reads it, releases it. */
int main(int argc, char **argv)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .device = 0, .size = 4u << 20, .tag = "install"};
	rocmmem_client *client;
	rocmmem_lease *lease;
	unsigned char *p;
	int err;

	if (argc != 2) {
		fprintf(stderr, "usage: %s SOCKET\n", argv[0]);
		return 2;
	}
	/* The loaded library serves what this header promises: same major, a minor as high. */
	if (rocmmem_version_number() / 10000 != ROCMMEM_VERSION_MAJOR ||
	    rocmmem_version_number() < ROCMMEM_VERSION_NUMBER) {
		fprintf(stderr, "librocmmem %s cannot serve a program built against %d.%d\n",
			rocmmem_version(), ROCMMEM_VERSION_MAJOR, ROCMMEM_VERSION_MINOR);
		return 1;
	}
	printf("librocmmem %s, built against %d.%d.%d\n", rocmmem_version(), ROCMMEM_VERSION_MAJOR,
	       ROCMMEM_VERSION_MINOR, ROCMMEM_VERSION_PATCH);
	err = rocmmem_connect(argv[1], "install-test", 5000, &client);
	if (err < 0) {
		fprintf(stderr, "Could not connect to %s: %s\n", argv[1], rocmmem_strerror(err));
		return 1;
	}
	err = rocmmem_lease_acquire(client, &req, &lease);
	if (err < 0) {
		fprintf(stderr, "Could not lease 4 MiB: %s\n", rocmmem_last_error());
		rocmmem_disconnect(client);
		return 1;
	}
	p = rocmmem_lease_ptr(lease);
	memset(p, 0xa5, rocmmem_lease_size(lease));
	for (size_t i = 0; i < rocmmem_lease_size(lease); i += 4096) {
		if (p[i] != 0xa5) {
			fprintf(stderr, "lease memory reads back wrong at %zu\n", i);
			return 1;
		}
	}
	printf("daemon %s, backend %s: leased and wrote %llu bytes\n",
	       rocmmem_client_daemon_version(client), rocmmem_client_backend(client),
	       (unsigned long long)rocmmem_lease_size(lease));
	err = rocmmem_lease_release(lease);
	rocmmem_disconnect(client);
	if (err < 0) {
		fprintf(stderr, "Could not release the lease: %s\n", rocmmem_strerror(err));
		return 1;
	}
	return EXIT_SUCCESS;
}
