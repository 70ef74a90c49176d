/* SPDX-License-Identifier: MIT */
#include "core/desc.h"
#include "util/util.h"

#include <errno.h>

uint64_t ve_desc_key(const struct ve_desc *d)
{
	uint64_t h = ve__mix64((uint64_t)d->kind + 1);
	switch (d->kind) {
	case VE_OP_KERNEL: {
		const struct ve_kernel_desc *k = &d->u.k;
		h = ve__hash_combine(h, k->fn);
		h = ve__hash_combine(h, ((uint64_t)k->grid.x << 32) | k->grid.y);
		h = ve__hash_combine(h, ((uint64_t)k->grid.z << 32) | k->block.x);
		h = ve__hash_combine(h, ((uint64_t)k->block.y << 32) | k->block.z);
		h = ve__hash_combine(h, k->smem);
		break;
	}
	case VE_OP_MEMCPY:
		h = ve__hash_combine(h, d->u.cp.dir);
		h = ve__hash_combine(h, d->u.cp.bytes);
		break;
	case VE_OP_MEMSET:
		h = ve__hash_combine(h, d->u.ms.width * d->u.ms.height * d->u.ms.elem_size);
		break;
	case VE_OP_CALL:
		/* A graph launch: T(graph, m) is kept per executable graph. */
		h = ve__hash_combine(h, d->u.call.handle);
		if (d->u.call.salt)
			h = ve__hash_combine(h, d->u.call.salt);
		break;
	default:
		break;
	}
	return h ? h : 1; /* 0 means "no key" to the profile store */
}

int ve_desc_finalize(struct ve_desc *d)
{
	if (!d || d->kind == VE_OP_NONE || d->kind >= VE_OP_KIND_MAX)
		return -EINVAL;
	if (d->payload_len > VE_DESC_MAX_PAYLOAD)
		return -E2BIG;
	if (d->payload_len && !d->payload)
		return -EINVAL;
	switch (d->kind) {
	case VE_OP_KERNEL: {
		const struct ve_kernel_desc *k = &d->u.k;
		if (!k->grid.x || !k->grid.y || !k->grid.z || !k->block.x || !k->block.y ||
		    !k->block.z)
			return -EINVAL;
		if (k->nattrs > VE_DESC_MAX_ATTRS || k->nparams > VE_DESC_MAX_PARAMS)
			return -E2BIG;
		uint32_t need = ve_desc_kernel_payload_len(k->nattrs, k->attr_size, k->param_bytes,
							   k->nparams);
		if (need != d->payload_len)
			return -EINVAL;
		break;
	}
	case VE_OP_HOST_FN:
		if (!d->u.host.fn)
			return -EINVAL;
		break;
	case VE_OP_CALL:
		if (!d->u.call.fn)
			return -EINVAL;
		break;
	case VE_OP_MEMSET:
		if (d->u.ms.elem_size != 1 && d->u.ms.elem_size != 2 && d->u.ms.elem_size != 4)
			return -EINVAL;
		break;
	default:
		break;
	}
	d->key = ve_desc_key(d);
	return 0;
}

const char *ve_op_kind_name(int kind)
{
	static const char *names[] = {"none",	     "kernel",	   "memcpy", "memset",
				      "host_fn",     "event_record", "event_wait", "call"};
	return kind >= 0 && kind < (int)VE_ARRAY_SIZE(names) ? names[kind] : "?";
}
