/* SPDX-License-Identifier: MIT */
/* version.h: the project and protocol versions shared by daemon, library and CLI. */
#ifndef ROCMMEM_COMMON_VERSION_H
#define ROCMMEM_COMMON_VERSION_H

/* Bump on every incompatible change to proto/rocmmem.proto (Hello's layout never changes). */
#define ROCMMEM_PROTOCOL_VERSION 1u

#ifndef ROCMMEM_VERSION_STRING
#define ROCMMEM_VERSION_STRING "0.0.0-unknown"
#endif

/* Longest client name and lease tag the daemon accepts, in bytes. */
#define ROCMMEM_NAME_MAX 64u

/* Leases are granted in whole granules. */
#define ROCMMEM_GRANULE ((uint64_t)2 << 20)

#endif
