/* SPDX-License-Identifier: MIT */
/* fuzz.h: what every fuzz target provides, and how it reports a broken invariant. */
#ifndef ROCMMEM_TEST_FUZZ_H
#define ROCMMEM_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * LLVMFuzzerTestOneInput runs one input through the code under test and checks its
 * invariants; it returns 0 and aborts (FUZZ_CHECK) when one does not hold. libFuzzer calls it
 * in the clang build (ROCMMEM_FUZZ=ON); replay.c's main calls it for each corpus file in every
 * other build.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * FUZZ_CHECK aborts with the failed condition and a message: libFuzzer saves the input as a
 * crash, replay.c's test fails.
 */
#define FUZZ_CHECK(cond, ...)                                                                \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, \
				#cond);                                                      \
			fprintf(stderr, __VA_ARGS__);                                        \
			fputc('\n', stderr);                                                 \
			abort();                                                             \
		}                                                                            \
	} while (0)

#endif
