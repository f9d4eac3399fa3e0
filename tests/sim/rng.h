/* SPDX-License-Identifier: MIT */
/* rng.h: the simulator's one source of chance: xoshiro256** seeded by splitmix64. */
#ifndef ROCMMEM_SIM_RNG_H
#define ROCMMEM_SIM_RNG_H

#include <stdint.h>

struct rng {
	uint64_t s[4];
};

static inline uint64_t rng_splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void rng_seed(struct rng *r, uint64_t seed)
{
	for (unsigned i = 0; i < 4; i++)
		r->s[i] = rng_splitmix(&seed);
}

static inline uint64_t rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s, result = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rng_rotl(s[3], 45);
	return result;
}

/* rng_below returns a number in [0, n) (0 when n is 0). */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64) : 0;
}

/* rng_range returns a number in [lo, hi]. */
static inline uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi)
{
	return lo + rng_below(r, hi - lo + 1);
}

/* rng_chance is true with probability per_million / 1e6. */
static inline int rng_chance(struct rng *r, uint32_t per_million)
{
	return rng_below(r, 1000000) < per_million;
}

#endif
