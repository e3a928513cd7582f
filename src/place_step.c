/* SPDX-License-Identifier: MIT */
/*
 * Rule 4, refined: the modelled step time of the whole job breaks the ties that every earlier
 * rule leaves between candidate domains (request.comm; place.c explains where it applies).
 * The efficiency floor (request.comm.min_efficiency) is place_floor.c's.
 */
#include "cost.h"
#include "place_internal.h"

/* Whether the step time can break a tie for k devices: the request says how it communicates
 * and the candidate holds the whole job. */
bool tp_pl_step_on(const struct pctx *p, uint32_t k)
{
	return p->q->comm && k == p->q->count && !p->have_used;
}

/* The modelled step time of the placement emission gives k devices in (l, d) at spread column
 * col, or a negative value when it cannot be had (out of memory: p->err is set). The devices
 * go to a scratch buffer; the call's output is left as it was. */
double tp_pl_step_of(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col)
{
	struct amark m = tp_pl_ar_mark(p);
	uint32_t *keep = p->out;
	size_t keep_n = p->nout, keep_cap = p->capout;
	uint32_t *buf = tp_pl_ar_alloc(p, (k ? k : 1) * sizeof *buf);
	double us = -1;
	if (buf) {
		p->out = buf;
		p->nout = 0;
		p->capout = k;
		if (tp_pl_emit(p, l, d, k, col) == 0 && p->nout == k &&
		    tp_cost_step_us(&us, p->t, buf, k, p->q->comm, p->a, NULL, 0) != 0)
			us = -1;
	}
	p->out = keep;
	p->nout = keep_n;
	p->capout = keep_cap;
	tp_pl_ar_release(p, m);
	return us;
}
