/* SPDX-License-Identifier: MIT */
/*
 * bench_gpu.c: the GPU path. The lease round trip with rocmmemd on the CUDA (or HIP) backend
 * (acquire, which imports and maps the memory into this process, then release), warm (the
 * daemon's chunk pool holds this client's released memory of that size: no allocation in the
 * daemon) and cold (the pool emptied by an untimed trim first: the daemon allocates), against
 * allocating the same sizes in this process with the runtime (cuMemAlloc/cuMemFree, the VMM
 * sequence cuMemCreate + reserve + map + set access, or hipMalloc/hipFree), in the same run,
 * interleaved; the import's cost (acquire mapped minus acquire with ROCMMEM_LEASE_NOMAP); and a
 * trim request's round trip. The daemon's warm grants are read from its status afterwards. The
 * runtimes are loaded with the project's own loaders (common/gpu), so $ROCMMEM_CUDA_LIBRARY and
 * $ROCMMEM_HIP_LIBRARY choose them as they do for the daemon.
 *
 * Without a GPU (no runtime, or one that sees no device) it writes "not run: no GPU" with the
 * loaders' reasons and exits 0.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cuda_api.h"
#include "hip_api.h"
#include "rocmmem.h"

#define MiB ((uint64_t)1 << 20)
#define MAX_SIZES 4

enum runtime { RT_NONE, RT_CUDA, RT_HIP };

/* What is timed, per size. */
enum what { W_LEASE, W_LEASE_NOMAP, W_ALLOC, W_VMM, W_TRIM, W_LEASE_COLD, WHATS };
static const char *const what_names[WHATS] = {"lease_round_trip",   "lease_nomap_round_trip",
					      "runtime_alloc_free", "runtime_vmm_create_map_free",
					      "trim_round_trip",    "lease_cold_round_trip"};

static struct {
	enum runtime rt;
	struct cuapi cu;
	struct hipapi hip;
	cuapi_result_t (*cu_alloc)(cuapi_deviceptr_t *ptr, size_t size);
	cuapi_result_t (*cu_free)(cuapi_deviceptr_t ptr);
	size_t granularity;
	char name[128];
} g;

/* detect loads a runtime that sees a device; why says what each one answered. */
static enum runtime detect(const char *want, char *why, size_t len)
{
	char cu_why[256] = "", hip_why[256] = "";
	int count = 0;

	if (strcmp(want, "hip") != 0 && cuapi_load(&g.cu, cu_why, sizeof(cu_why)) == 0) {
		cuapi_device_t dev;
		cuapi_ctx_t ctx;

		if (g.cu.cuDeviceGet(&dev, 0) == CUAPI_SUCCESS &&
		    g.cu.cuDevicePrimaryCtxRetain(&ctx, dev) == CUAPI_SUCCESS &&
		    g.cu.cuCtxSetCurrent(ctx) == CUAPI_SUCCESS) {
			g.cu.cuDeviceGetName(g.name, sizeof(g.name), dev);
			/* Not in the project's list (it never allocates this way): looked up here.
			 */
			*(void **)&g.cu_alloc = dlsym(g.cu.lib, "cuMemAlloc_v2");
			*(void **)&g.cu_free = dlsym(g.cu.lib, "cuMemFree_v2");
			return RT_CUDA;
		}
		snprintf(cu_why, sizeof(cu_why), "no CUDA context on device 0");
	}
	if (strcmp(want, "cuda") != 0 && hipapi_load(&g.hip, hip_why, sizeof(hip_why)) == 0) {
		if (g.hip.hipGetDeviceCount(&count) == 0 && count > 0 &&
		    g.hip.hipSetDevice(0) == 0) {
			g.hip.hipDeviceGetName(g.name, sizeof(g.name), 0);
			return RT_HIP;
		}
		snprintf(hip_why, sizeof(hip_why), "HIP sees no device");
	}
	snprintf(why, len, "CUDA: %s; HIP: %s", cu_why[0] ? cu_why : "not tried",
		 hip_why[0] ? hip_why : "not tried");
	return RT_NONE;
}

static int cu_vmm_cycle(size_t size)
{
	struct cuapi_alloc_prop prop = {.type = CUAPI_MEM_ALLOCATION_PINNED,
					.requested_handle_types = CUAPI_MEM_HANDLE_POSIX_FD,
					.location = {CUAPI_MEM_LOCATION_DEVICE, 0}};
	struct cuapi_access_desc access = {.location = {CUAPI_MEM_LOCATION_DEVICE, 0},
					   .flags = CUAPI_MEM_ACCESS_READWRITE};
	cuapi_mem_handle_t h;
	cuapi_deviceptr_t p;

	if (g.cu.cuMemCreate(&h, size, &prop, 0) != CUAPI_SUCCESS)
		return -ENOMEM;
	if (g.cu.cuMemAddressReserve(&p, size, 0, 0, 0) != CUAPI_SUCCESS) {
		g.cu.cuMemRelease(h);
		return -ENOMEM;
	}
	if (g.cu.cuMemMap(p, size, 0, h, 0) != CUAPI_SUCCESS ||
	    g.cu.cuMemSetAccess(p, size, &access, 1) != CUAPI_SUCCESS) {
		g.cu.cuMemAddressFree(p, size);
		g.cu.cuMemRelease(h);
		return -EIO;
	}
	g.cu.cuMemUnmap(p, size);
	g.cu.cuMemAddressFree(p, size);
	g.cu.cuMemRelease(h);
	return 0;
}

/* lease acquires and releases size bytes (flags: ROCMMEM_LEASE_*). */
static int lease(rocmmem_client *c, uint64_t size, uint32_t flags)
{
	struct rocmmem_lease_request req = {
	    .struct_size = sizeof(req), .size = size, .timeout_ms = 5000, .flags = flags};
	rocmmem_lease *l;
	int err = rocmmem_lease_acquire(c, &req, &l);

	return err ? err : rocmmem_lease_release(l);
}

/* one times one operation of kind w on size bytes; -ENOTSUP when this runtime has none. */
static int one(rocmmem_client *c, enum what w, uint64_t size, uint64_t *ns)
{
	uint64_t t0;
	int err = 0;

	/* Cold: the daemon's pool emptied first (untimed), so that it allocates. */
	if (w == W_LEASE_COLD && (err = rocmmem_trim(c, 0, NULL)) != 0 && err != -EBUSY)
		return err;
	t0 = bench_now_ns();
	err = 0;
	switch (w) {
	case W_LEASE_COLD:
		err = lease(c, size, 0);
		break;
	case W_LEASE:
	case W_LEASE_NOMAP:
		err = lease(c, size, w == W_LEASE_NOMAP ? ROCMMEM_LEASE_NOMAP : 0);
		break;
	case W_ALLOC:
		if (g.rt == RT_CUDA) {
			cuapi_deviceptr_t p;

			if (!g.cu_alloc || !g.cu_free)
				return -ENOTSUP;
			if (g.cu_alloc(&p, size) != CUAPI_SUCCESS)
				return -ENOMEM;
			g.cu_free(p);
		} else {
			void *p;

			if (g.hip.hipMalloc(&p, size) != 0)
				return -ENOMEM;
			g.hip.hipFree(p);
		}
		break;
	case W_VMM:
		if (g.rt != RT_CUDA)
			return -ENOTSUP;
		err = cu_vmm_cycle(size);
		break;
	case W_TRIM:
		err = rocmmem_trim(c, 0, NULL);
		if (err == -EBUSY)
			err = 0;
		break;
	default:
		return -EINVAL;
	}
	*ns = bench_now_ns() - t0;
	return err;
}

/* pool_figures writes what the daemon's status says of its chunk pool on device 0. */
static void pool_figures(struct bench_json *j, rocmmem_client *c)
{
	rocmmem_status *st = NULL;
	const struct rocmmem_device_info *v;

	if (rocmmem_status_get(c, &st) != 0)
		return;
	v = rocmmem_status_device(st, 0);
	if (v) {
		bench_json_int(j, "pool_warm_grants", (int64_t)v->pool_warm_grants);
		bench_json_int(j, "pool_limit_bytes", (int64_t)v->pool_limit_bytes);
	}
	rocmmem_status_free(st);
}

int main(int argc, char **argv)
{
	const char *want = "auto";
	static const uint64_t sizes_full[] = {2 * MiB, 64 * MiB, 1024 * MiB};
	const uint64_t *sizes = sizes_full;
	struct bench_hist hist[MAX_SIZES][WHATS];
	bool supported[WHATS] = {false};
	struct bench_args args;
	struct bench_daemon d = {0};
	rocmmem_client *c = NULL;
	unsigned nsizes, rounds, per;
	bool stand_in = false;
	char why[600] = "";
	struct bench_json j;
	int err = 0, status = 1;
	FILE *out = NULL;

	argc = bench_parse_common(argc, argv, &args);
	if (argc < 0)
		return 2;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--runtime") == 0 && i + 1 < argc) {
			want = argv[++i];
		} else if (strcmp(argv[i], "--stand-in") == 0) {
			stand_in = true;
		} else {
			return bench_usage("bench_gpu", " [--runtime auto|cuda|hip] [--stand-in]");
		}
	}
	g.rt = detect(want, why, sizeof(why));
	if (g.rt == RT_NONE) {
		out = bench_open_output(&args);
		if (!out)
			return 1;
		bench_json_open(&j, out);
		bench_json_str(&j, "benchmark", "gpu");
		bench_json_str(&j, "status", "not run: no GPU");
		bench_json_str(&j, "why", why);
		bench_json_close(&j);
		if (out != stdout)
			fclose(out);
		return 0;
	}
	if (!args.rocmmemd)
		return bench_need_daemon("bench_gpu");
	nsizes = (unsigned)bench_mode_pick(&args, 1, 2, 3);
	rounds = (unsigned)bench_mode_pick(&args, 2, 5, 10);
	per = (unsigned)bench_mode_pick(&args, 5, 20, 50);
	for (unsigned s = 0; s < nsizes; s++)
		for (unsigned w = 0; w < WHATS; w++)
			bench_hist_init(&hist[s][w]);
	{
		const char *backend = g.rt == RT_CUDA ? "cuda" : "hip";
		const char *dargs[] = {"--backend", backend, "--budget", "4G", NULL};

		if ((err = bench_daemon_start(&d, args.rocmmemd, -1, dargs, NULL)) ||
		    (err = rocmmem_connect(d.sock, "bench-gpu", 5000, &c)))
			goto out;
	}
	for (unsigned w = 0; w < WHATS; w++)
		supported[w] = true;
	for (unsigned r = 0; r < rounds && !err; r++) {
		for (unsigned s = 0; s < nsizes && !err; s++) {
			for (unsigned k = 0; k < WHATS && !err; k++) {
				unsigned w = (k + r) % WHATS;

				if (w == W_TRIM && s > 0)
					continue;
				/* Warm: the pool holds this size once one lease of it was released.
				 */
				if ((w == W_LEASE || w == W_LEASE_NOMAP) &&
				    (err = lease(c, sizes[s], 0)) != 0)
					break;
				for (unsigned i = 0; i < per && supported[w]; i++) {
					uint64_t ns;
					int rc = one(c, (enum what)w, sizes[s], &ns);

					if (rc == -ENOTSUP) {
						supported[w] = false;
					} else if (rc) {
						err = rc;
						fprintf(stderr,
							"bench_gpu: %s of %" PRIu64
							" bytes failed: %s (%s)\n",
							what_names[w], sizes[s], strerror(-rc),
							rocmmem_last_error());
						break;
					} else if (r > 0) {
						bench_hist_add(&hist[s][w], ns);
					}
				}
			}
		}
	}
	if (err)
		goto out;
	out = bench_open_output(&args);
	if (!out)
		goto out;
	bench_json_open(&j, out);
	bench_json_str(&j, "benchmark", "gpu");
	bench_json_str(&j, "status",
		       stand_in ? "run on the stand-in runtime (tests/fakegpu), not a GPU" : "run");
	bench_json_str(&j, "runtime", g.rt == RT_CUDA ? "cuda" : "hip");
	bench_json_str(&j, "library", g.rt == RT_CUDA ? g.cu.path : g.hip.path);
	bench_json_str(&j, "device", g.name);
	bench_json_bool(&j, "stand_in", stand_in);
	bench_json_int(&j, "rounds", rounds);
	bench_json_array(&j, "sizes");
	for (unsigned s = 0; s < nsizes; s++) {
		const struct bench_hist *lease = &hist[s][W_LEASE],
					*nomap = &hist[s][W_LEASE_NOMAP];
		const struct bench_hist *base = supported[W_ALLOC] ? &hist[s][W_ALLOC] : NULL;

		bench_json_object(&j, NULL);
		bench_json_int(&j, "bytes", (int64_t)sizes[s]);
		for (unsigned w = 0; w < WHATS; w++) {
			if (!supported[w] || (w == W_TRIM && s > 0))
				continue;
			bench_json_hist(&j, what_names[w], &hist[s][w]);
		}
		if (!supported[W_ALLOC])
			bench_json_str(&j, "runtime_alloc_free",
				       "not available in this runtime library");
		bench_json_num(
		    &j, "import_p50_us",
		    ((double)bench_hist_pct(lease, 50) - (double)bench_hist_pct(nomap, 50)) /
			1000.0);
		if (base)
			bench_json_num(&j, "ratio_p50_vs_runtime_alloc",
				       bench_ratio((double)bench_hist_pct(lease, 50),
						   (double)bench_hist_pct(base, 50)));
		if (base)
			bench_json_num(
			    &j, "ratio_p50_cold_vs_runtime_alloc",
			    bench_ratio((double)bench_hist_pct(&hist[s][W_LEASE_COLD], 50),
					(double)bench_hist_pct(base, 50)));
		if (supported[W_VMM])
			bench_json_num(&j, "ratio_p50_vs_in_process_vmm",
				       bench_ratio((double)bench_hist_pct(lease, 50),
						   (double)bench_hist_pct(&hist[s][W_VMM], 50)));
		bench_json_end_object(&j);
	}
	bench_json_end_array(&j);
	pool_figures(&j, c);
	bench_json_close(&j);
	if (out != stdout)
		fclose(out);
	status = 0;
out:
	if (err)
		fprintf(stderr, "bench_gpu: failed: %s\n", strerror(-err));
	rocmmem_disconnect(c);
	if (d.pid > 0 && bench_daemon_stop(&d) != 0)
		status = 1;
	return status;
}
