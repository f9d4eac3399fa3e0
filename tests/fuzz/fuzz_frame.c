/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frame.c: one packet as the daemon takes it: the frame cap, protobuf-c's decoding of a
 * ClientMessage into the daemon's arena, and validate_request; checks that the verdict is well
 * formed and stable.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "rocmmem.pb-c.h"
#include "text.h"
#include "net/net.h"
#include "net/validate.h"
#include "version.h"
#include "wire.h"
#include "wire_arena.h"

/* Devices the simulated daemon manages (validate_request's only outside fact). */
#define FUZZ_DEVICES 2u

/* check_refusal: a refusal is one of the errnos the protocol documents, told in clean text. */
static void check_refusal(int err, const char *why, size_t cap)
{
	static const int known[] = {-EPROTO, -EPROTONOSUPPORT, -EOPNOTSUPP, -EINVAL, -ENODEV};
	bool listed = false;
	size_t n = strnlen(why, cap);

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		listed = listed || err == known[i];
	FUZZ_CHECK(listed, "validate_request returned %d, not a documented refusal", err);
	FUZZ_CHECK(n > 0 && n < cap, "refusal %d comes without a message", err);
	/* The message is the daemon's own words: nothing the client sent is echoed raw. */
	FUZZ_CHECK(text_is_clean(why, cap), "refusal %d has unclean text", err);
}

/* check_accepted restates, independently of validate.c, what an accepted request promises. */
static void check_accepted(const Rocmmem__Wire__ClientMessage *m)
{
	FUZZ_CHECK(m->has_id && m->id != 0, "accepted a request without an id");
	FUZZ_CHECK(m->body_case != ROCMMEM__WIRE__CLIENT_MESSAGE__BODY__NOT_SET,
		   "accepted a request without a body");
	switch (m->body_case) {
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_HELLO:
		FUZZ_CHECK(m->hello->has_protocol_version &&
			       m->hello->protocol_version == ROCMMEM_PROTOCOL_VERSION,
			   "accepted hello version %u", m->hello->protocol_version);
		FUZZ_CHECK(!m->hello->client_name ||
			       strlen(m->hello->client_name) <= ROCMMEM_NAME_MAX,
			   "accepted a long client name");
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE: {
		const Rocmmem__Wire__LeaseAcquire *r = m->lease_acquire;

		FUZZ_CHECK(r->has_size && r->size > 0, "accepted a lease of no size");
		FUZZ_CHECK(!r->has_device || r->device < FUZZ_DEVICES, "accepted device %u",
			   r->device);
		FUZZ_CHECK(!r->tag || strlen(r->tag) <= ROCMMEM_NAME_MAX, "accepted a long tag");
		break;
	}
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE:
		FUZZ_CHECK(m->lease_release->has_lease_id, "accepted a release of no lease");
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER: {
		const Rocmmem__Wire__ModelRegister *r = m->model_register;

		FUZZ_CHECK(r->name && r->name[0] && strlen(r->name) <= ROCMMEM_NAME_MAX,
			   "accepted a model without a proper name");
		FUZZ_CHECK(!r->has_class_ || (r->class_ >= 0 && r->class_ < 5),
			   "accepted model class %d", (int)r->class_);
		FUZZ_CHECK(!r->has_device || r->device < FUZZ_DEVICES, "accepted device %u",
			   r->device);
		FUZZ_CHECK(!r->has_reservation || r->reservation == 0,
			   "accepted a reservation at register");
		break;
	}
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_RESIZE:
		FUZZ_CHECK(m->model_resize->has_reservation, "accepted a resize to nothing");
		break;
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_SUBSCRIBE: {
		const Rocmmem__Wire__Subscribe *r = m->subscribe;
		bool samples = r->has_samples && r->samples, events = r->has_events && r->events;

		FUZZ_CHECK(samples || events, "accepted a subscription to nothing");
		FUZZ_CHECK(!samples || (r->has_interval_ms && r->interval_ms >= 10 &&
					r->interval_ms <= 60000),
			   "accepted interval %u", r->interval_ms);
		break;
	}
	case ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_TRIM:
		FUZZ_CHECK(!m->trim->has_device || m->trim->device < FUZZ_DEVICES,
			   "accepted a trim of device %u", m->trim->device);
		break;
	default:
		break;
	}
}

/* Unknown fields hidden while a message is packed, to be put back before it is freed. */
struct hidden {
	ProtobufCMessage *msg[16];
	unsigned n_unknown[16];
	unsigned count;
};

/*
 * hide_unknown sets aside the unknown fields of m and of every message inside it. protobuf-c
 * keeps them verbatim and packs them back as they came, which another unpack may refuse: it
 * takes field number 0 in an overlong tag (80 00) but not in the canonical one (00). The
 * daemon ignores unknown fields, so the round trip is checked on the fields it reads.
 */
static void hide_unknown(ProtobufCMessage *m, struct hidden *h)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	FUZZ_CHECK(h->count < 16, "messages nested deeper than the protocol's");
	h->msg[h->count] = m;
	h->n_unknown[h->count++] = m->n_unknown_fields;
	m->n_unknown_fields = 0;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		ProtobufCMessage *sub;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		/* A oneof's members share one pointer: only the member its case names is set. */
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
			continue;
		memcpy(&sub, (const char *)m + f->offset, sizeof(sub));
		if (sub)
			hide_unknown(sub, h);
	}
}

static void restore_unknown(struct hidden *h)
{
	for (unsigned i = 0; i < h->count; i++)
		h->msg[i]->n_unknown_fields = h->n_unknown[i];
}

/* pack packs m into a fresh buffer (free it); *len gets its size. */
static uint8_t *pack(const Rocmmem__Wire__ClientMessage *m, size_t *len)
{
	uint8_t *buf;

	*len = rocmmem__wire__client_message__get_packed_size(m);
	buf = malloc(*len ? *len : 1);
	FUZZ_CHECK(buf, "out of memory");
	FUZZ_CHECK(rocmmem__wire__client_message__pack(m, buf) == *len,
		   "packing disagrees with its own size");
	return buf;
}

#ifdef ROCMMEM_LIBFUZZER
/*
 * Structure-aware mutation. Byte flips rarely keep a message decodable, and a string that
 * must grow from 64 to 65 bytes needs two length prefixes changed at once: most of the time
 * the input is decoded, one field somewhere in it is changed as a whole (a value at the edge
 * of a check, a string of a chosen length and kind, another member of a oneof), and the
 * message is packed again. The rest of the time libFuzzer mutates the bytes.
 */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

static uint32_t mutation_state;

static uint32_t pick(uint32_t n)
{
	mutation_state = mutation_state * 1103515245u + 12345u;
	return n ? (mutation_state >> 8) % n : 0;
}

/* Values at the edges of the checks: sizes, devices, classes, intervals, timeouts, ids. */
static uint64_t edge_value(void)
{
	static const uint64_t values[] = {0,
					  1,
					  2,
					  3,
					  4,
					  5,
					  9,
					  10,
					  11,
					  63,
					  64,
					  65,
					  59999,
					  60000,
					  60001,
					  0x7f,
					  0x80,
					  0xffff,
					  0x7fffffff,
					  0x80000000,
					  0xffffffff,
					  1ull << 32,
					  1ull << 63,
					  UINT64_MAX,
					  UINT64_MAX - 1,
					  2ull << 20,
					  (2ull << 20) + 1};

	return pick(4) == 0 ? ((uint64_t)pick(UINT32_MAX) << 32) | pick(UINT32_MAX)
			    : values[pick(sizeof(values) / sizeof(values[0]))];
}

/*
 * new_string makes a string at and around the 64-byte limit: plain ASCII, clean UTF-8 (a
 * character may straddle the limit), or either with one character no name may hold.
 */
static char *new_string(void)
{
	static const char *const clean[] = {"\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x99\x82"};
	static const char *const dirty[] = {
	    "\x1b",    "\n",	   "\x7f",	   "\xc2\x85",
	    "\xff",    "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	    "\xe6\x97"};
	size_t len = pick(4) ? 60 + pick(8) : pick(80), n = 0, bad_at = SIZE_MAX;
	uint32_t kind = pick(4);
	char *s = malloc(len + 8);

	FUZZ_CHECK(s, "out of memory");
	if (kind >= 2)
		bad_at = pick((uint32_t)len + 1);
	while (n < len) {
		const char *p = "a";
		size_t k;

		if (n >= bad_at) {
			p = dirty[pick(sizeof(dirty) / sizeof(dirty[0]))];
			bad_at = SIZE_MAX;
		} else if ((kind == 1 || kind == 3) && pick(4) == 0) {
			p = clean[pick(sizeof(clean) / sizeof(clean[0]))];
		}
		k = strlen(p);
		memcpy(s + n, p, k);
		n += k;
	}
	s[n] = '\0';
	return s;
}

static void set_scalar(void *at, ProtobufCType type, uint64_t v)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_SFIXED64:
		memcpy(at, &v, sizeof(v));
		break;
	case PROTOBUF_C_TYPE_BOOL: {
		protobuf_c_boolean b = (protobuf_c_boolean)(v & 1);

		memcpy(at, &b, sizeof(b));
		break;
	}
	default: { /* 32-bit integers and enums; a negative enum or int32 comes from -v */
		uint32_t w = (uint32_t)(pick(4) == 0 ? -v : v);

		memcpy(at, &w, sizeof(w));
		break;
	}
	}
}

/* drop_member frees what the member set in f's oneof holds, and leaves the oneof unset. */
static void drop_member(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	uint32_t which;

	memcpy(&which, (char *)m + f->quantifier_offset, sizeof(which));
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *g = &d->fields[i];
		void *p;

		if (g->id != which || g->quantifier_offset != f->quantifier_offset)
			continue;
		memcpy(&p, (char *)m + g->offset, sizeof(p));
		if (g->type == PROTOBUF_C_TYPE_MESSAGE && p)
			protobuf_c_message_free_unpacked(p, NULL);
		else if (g->type == PROTOBUF_C_TYPE_STRING)
			free(p);
	}
	which = 0;
	memcpy((char *)m + f->quantifier_offset, &which, sizeof(which));
}

/* mutate_field changes one field of m, or of a message inside it. */
static void mutate_field(ProtobufCMessage *m, unsigned depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const ProtobufCFieldDescriptor *f;
	bool oneof;
	char *at;

	if (d->n_fields == 0)
		return;
	f = &d->fields[pick(d->n_fields)];
	oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
	at = (char *)m + f->offset;
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return;
	if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
		const ProtobufCMessageDescriptor *sd = f->descriptor;
		ProtobufCMessage *sub;
		uint32_t which = 0;

		if (oneof)
			memcpy(&which, (char *)m + f->quantifier_offset, sizeof(which));
		memcpy(&sub, at, sizeof(sub));
		if (oneof && which == f->id && sub && depth < 4 && pick(4)) {
			mutate_field(sub, depth + 1);
			return;
		}
		if (oneof)
			drop_member(m, f);
		else if (sub)
			protobuf_c_message_free_unpacked(sub, NULL);
		sub = NULL;
		/* Now and then the oneof is left empty; else this member, fresh, is set. */
		if (!oneof || pick(8)) {
			sub = calloc(1, sd->sizeof_message);
			FUZZ_CHECK(sub, "out of memory");
			sd->message_init(sub);
			if (oneof)
				memcpy((char *)m + f->quantifier_offset, &f->id, sizeof(f->id));
		}
		memcpy(at, &sub, sizeof(sub));
		return;
	}
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		char *old, *s = pick(8) ? new_string() : NULL;

		if (oneof) {
			drop_member(m, f);
		} else {
			memcpy(&old, at, sizeof(old));
			if (old != f->default_value)
				free(old);
		}
		memcpy(at, &s, sizeof(s));
		if (oneof && s)
			memcpy((char *)m + f->quantifier_offset, &f->id, sizeof(f->id));
		return;
	}
	if (f->type == PROTOBUF_C_TYPE_BYTES)
		return; /* no request carries bytes */
	if (oneof) {
		drop_member(m, f);
		memcpy((char *)m + f->quantifier_offset, &f->id, sizeof(f->id));
	} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
		protobuf_c_boolean has = pick(8) != 0;

		memcpy((char *)m + f->quantifier_offset, &has, sizeof(has));
	}
	set_scalar(at, f->type, edge_value());
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	Rocmmem__Wire__ClientMessage *msg;
	size_t len;

	mutation_state = seed;
	msg = pick(4) ? rocmmem__wire__client_message__unpack(NULL, size, data) : NULL;
	if (!msg)
		return LLVMFuzzerMutate(data, size, max_size);
	for (uint32_t i = 0, n = 1 + pick(3); i < n; i++)
		mutate_field(&msg->base, 0);
	len = rocmmem__wire__client_message__get_packed_size(msg);
	if (len <= max_size)
		rocmmem__wire__client_message__pack(msg, data);
	rocmmem__wire__client_message__free_unpacked(msg, NULL);
	return len <= max_size ? len : LLVMFuzzerMutate(data, size, max_size);
}
#endif

/* The daemon's arena (struct server's rx_arena): what each packet unpacks into. */
static alignas(max_align_t) uint8_t arena_buf[NET_RX_ARENA_BYTES];
static struct wire_arena arena;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Rocmmem__Wire__ClientMessage *msg, *again;
	struct hidden hidden = {.count = 0};
	char why[256], why_again[256];
	uint8_t *bytes, *bytes_again;
	size_t len, len_again;
	int err, err_again;

	/*
	 * What the daemon unpacks: wire_recv reads an empty packet as the end of the connection
	 * and refuses one over the cap before protobuf-c sees it.
	 */
	if (size == 0 || size > WIRE_MAX_FRAME)
		return 0;
	if (!arena.pc.alloc)
		wire_arena_init(&arena, arena_buf, sizeof(arena_buf));
	msg = rocmmem__wire__client_message__unpack(&arena.pc, size, data);
	if (!msg) {
		wire_arena_reset(&arena);
		return 0; /* the daemon answers -EBADMSG and disconnects */
	}
	FUZZ_CHECK(protobuf_c_message_check(&msg->base), "unpacked a message that fails its check");

	memset(why, 0x5a, sizeof(why));
	err = validate_request(msg, FUZZ_DEVICES, why, sizeof(why));
	FUZZ_CHECK(err <= 0, "validate_request returned %d", err);
	if (err < 0) {
		check_refusal(err, why, sizeof(why));
	} else {
		check_accepted(msg);
		/* A daemon with more devices accepts everything one with fewer does. */
		FUZZ_CHECK(validate_request(msg, FUZZ_DEVICES + 1, why, sizeof(why)) == 0,
			   "accepted with %u devices but not with more", FUZZ_DEVICES);
	}
	/* With no devices at all nothing that names or implies a device passes. */
	if (msg->body_case == ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE ||
	    msg->body_case == ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_MODEL_REGISTER)
		FUZZ_CHECK(validate_request(msg, 0, why, sizeof(why)) < 0,
			   "accepted a device request on a daemon without devices");

	/*
	 * Round trip: what was decoded packs, decodes again to the same verdict, and packs to
	 * the same bytes (the canonical form is a fixed point).
	 */
	hide_unknown(&msg->base, &hidden);
	bytes = pack(msg, &len);
	restore_unknown(&hidden);
	/* The library's way this time: a block of its own. */
	again = (Rocmmem__Wire__ClientMessage *)wire_unpack(
	    &rocmmem__wire__client_message__descriptor, len, bytes);
	FUZZ_CHECK(again, "a packed message (%zu bytes) does not unpack", len);
	err_again = validate_request(again, FUZZ_DEVICES, why_again, sizeof(why_again));
	FUZZ_CHECK(err_again == err, "verdict %d became %d after a round trip", err, err_again);
	FUZZ_CHECK(again->body_case == msg->body_case && again->id == msg->id,
		   "a round trip changed the request");
	bytes_again = pack(again, &len_again);
	FUZZ_CHECK(len_again == len && memcmp(bytes, bytes_again, len) == 0,
		   "packing is not a fixed point (%zu then %zu bytes)", len, len_again);
	free(bytes_again);
	free(bytes);
	wire_unpacked_free(&again->base);
	wire_arena_reset(&arena);
	return 0;
}
