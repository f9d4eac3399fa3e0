/* SPDX-License-Identifier: MIT */
/* config.h: the allocator's settings (see config.c and rocmmem_torch.h's environment). */
#ifndef ROCMMEM_TORCH_CONFIG_H
#define ROCMMEM_TORCH_CONFIG_H

#include <stdint.h>

/* config_init reads the environment once; the setters' values win over it. */
void config_init(void);

/* config_chunk_bytes and config_keep_bytes: the lease size small tensors share and the largest
 * empty lease kept. books_lock held. */
uint64_t config_chunk_bytes(void);
uint64_t config_keep_bytes(void);

/* config_timeout_ms: how long a lease request may wait (0: not at all; < 0: no limit). */
int64_t config_timeout_ms(void);

/* config_round_granule rounds n up to the daemon's granule (2 MiB). */
uint64_t config_round_granule(uint64_t n);

#endif
