/* SPDX-License-Identifier: MIT */
/*
 * Rule 3 refined for requests one domain must hold: best fit at the level that holds the job.
 *
 * The tree solver's best fit compares the free devices of the used domains level by level from
 * the top, so a job that must sit in one rack goes to the tightest block first and then to its
 * tightest rack, even when that rack is nearly empty and another block has a rack almost full:
 * it breaks a rack that a later rack-sized slice needed, to keep a block's free count high.
 * What later jobs of that size need is whole racks, and a block is only as useful as the racks
 * it keeps whole. So for a request with a required level L below the top (a required node
 * included: then L is the node level), the domain of L is chosen over the whole level, by this
 * order (rules 1 and 2 untouched: every candidate uses one domain at each level down to L, and
 * the counts below L come first):
 *     the domains used below L (rule 1), the candidate's own free devices (the tightest rack),
 *     then its ancestors' free devices from the top, then the free devices below L;
 * where the racks join their nodes by NVLink and jobs wider than half a rack hold at least a
 * quarter of the devices the running jobs hold (the running mix: tp_cluster.wide_devs,
 * held_devs), a required node is chosen at its rack instead (L = the rack: keep racks whole
 * for those jobs; llm on nvl72:10080 lost up to 0.9 points without it, the small-job
 * workloads never reach the share);
 * for a node (L the node level) the ancestors break no tie: of the tightest nodes the lowest
 * index wins, Kueue's BestFit. Tightest ancestors first spreads small jobs over whichever rack
 * or block is fullest at the time, and the preference moves as jobs end; a fixed order fills
 * the same nodes again and keeps the others whole for the node-sized jobs (measured on the
 * comparison grid, session 25 in docs/benchmarks.md: StrictFIFO openb-like on hgx:4096 lost
 * 1.39% to kueue-like with the ancestors, 0.62% without; philly on nvl72:864 went from -1.73%
 * to +0.25%).
 * The candidates come from the cluster's index of level L (free count, index: Judy1), tightest
 * first, so the search is a walk of that index that stops at the first candidate meeting the
 * count bound once the next is looser; of the candidates as tight as the best, at most
 * PIN_TIES are looked at, and only those with tighter ancestors are evaluated (so the free
 * devices below L break no tie between candidates with the same ancestors' figures: the
 * lowest index wins; on a large empty cluster every rack ties, and the tightest block among the
 * first PIN_TIES racks wins). No cluster scan: the walk reads the index, the ancestors' free
 * counts and the subtree of each candidate it evaluates, as the top-level walk does.
 *
 * With an expected end (request.expected_end_s) the running jobs' expected ends come before
 * best fit among the tightest nodes: of the best node and the TP_PL_END_TIES nodes after it in
 * the index's order (fewest free devices, then the index), the one whose jobs end last at or
 * after the job's own end and nearest to it, else the one that ends last, else (no end known:
 * a wholly free node among them) the first in that order (place_end.c). Nodes that free at the
 * same time become whole together: on the comparison grid's StrictFIFO cells, where the head
 * of the queue waits for whole nodes, ends among nodes as tight were worth +2.9 to +8.9%
 * effective GPU-hours on hgx:4096 (docs/benchmarks.md, session 27), and ends before best fit
 * among the tightest TP_PL_END_TIES + 1 a further +1.3 to +1.9% on the StrictFIFO cells of the
 * small-job workloads over 12 seeds, level elsewhere (session 32). The single-child search of
 * place_table.c (node filters, a step model) keeps the end among nodes as tight only. Each
 * compared node costs a read of its devices.
 *
 * The chosen domain is pinned (p->pin_on, pin_level, pin_dom): the single-child search above it
 * then offers only the pinned domain's ancestor (tp_pl_pin_offer), so evaluation and emission
 * take it. Off, and the tree solver's order kept, where the walk would not be exact or cheap:
 * node filters, a scope, the placement mix (its loss comes before best fit), comm (rule 4's
 * ties), balance, spreads and failure-domain rules, replace.
 */
#include "place_internal.h"

/* Candidates as tight as the best compared on their ancestors' free devices. */
#define PIN_TIES 16

/* For a request one node must hold: the node, or the node's NVLink rack while jobs wider than
 * half a rack hold at least a quarter of the devices the running jobs hold (see above). */
static unsigned node_pin_level(const struct pctx *p)
{
	const struct tp_cluster *c = p->c;
	if (tp_cl_nvlink_rack_devices(p->t) && c->held_devs && 4 * c->wide_devs >= c->held_devs)
		return p->nl - 1;
	return p->nl;
}

/* The level whose domains the choice walks for this request, or -1 for none. */
static int pin_level(const struct pctx *p, uint32_t k)
{
	const struct tp_rq *q = p->q;
	if (!p->compact || p->single_to < 1 || p->filtered || p->ideal || p->spares ||
	    p->have_used || p->mix_on || p->sl >= 0 || q->balanced || tp_pl_step_on(p, k) ||
	    tp_pl_has_fd_rules(q) || q->colocate_slot != TP_NO_JOB_SLOT)
		return -1;
	unsigned L = (unsigned)p->single_to == p->nl ? node_pin_level(p) : (unsigned)p->single_to;
	if (L < 1 || !p->c->indexed[L] || !p->c->index[L])
		return -1;
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->scope[l])
			return -1;
	return (int)L;
}

/* Whether domain d of level L has tighter ancestors than domain b (their free devices from
 * the top, lexicographically): only then can a candidate as tight as the best beat it. */
static bool tighter_ancestors(const struct pctx *p, unsigned L, uint32_t d, uint32_t b)
{
	uint32_t fd, fb, n;
	tp_dom_nodes(p->t, L, d, &fd, &n);
	tp_dom_nodes(p->t, L, b, &fb, &n);
	for (unsigned l = 0; l < L; l++) {
		uint32_t x = dom_free(p, (int)l, tp_node_ancestor(p->t, fd, l));
		uint32_t y = dom_free(p, (int)l, tp_node_ancestor(p->t, fb, l));
		if (x != y)
			return x < y;
	}
	return false;
}

/* The whole cost of k devices in domain d of level L, whose own cost (below and at L) is v:
 * one domain and the free devices of each ancestor added. */
static void with_ancestors(const struct pctx *p, unsigned L, uint32_t d, uint32_t k, uint32_t *v)
{
	uint32_t first, n;
	tp_dom_nodes(p->t, L, d, &first, &n);
	for (unsigned l = 0; l < L; l++)
		add_self(p, (int)l, tp_node_ancestor(p->t, first, l), k, v);
}

/* The choice's order on whole cost vectors a and b of level-L candidates (see above). */
static int pin_cmp(const struct pctx *p, unsigned L, const uint32_t *a, const uint32_t *b)
{
	for (unsigned i = 0; i < p->nlev; i++) /* rule 1 */
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	unsigned own = p->fb + L;
	if (a[own] != b[own])
		return a[own] < b[own] ? -1 : 1;
	for (unsigned i = L == p->nl ? own + 1 : p->fb; i < p->W; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* Choose and pin the domain for k devices (see above). 0 (pinned or not) or an error. */
int tp_pl_pin_choose(struct pctx *p, uint32_t k)
{
	p->pin_on = false;
	int L = pin_level(p, k);
	if (L < 0)
		return 0;
	JError_t je;
	Word_t key = (Word_t)k << 32;
	uint32_t best[W_MAX], v[W_MAX], bdom = TP_NONE, bfree = 0, ties = 0, wfree = 0;
	bool met = false, has_loser = false, tied = false, stopped = false, by_end = false;
	bool looser = false; /* with an end: a node as suited but looser lost on best fit */
	uint32_t loser[W_MAX];
	/* rule 3 refined by the expected end (tp_request.expected_end_s in topoplace.h) */
	bool ends = (unsigned)L == p->nl && p->q->end_s > 0;
	struct tp_end_key bkey = {2, 0};
	for (int r = Judy1First(p->c->index[L], &key, &je); r == 1 && !p->err;
	     r = Judy1Next(p->c->index[L], &key, &je)) {
		uint32_t d = (uint32_t)(key & 0xffffffffu), f = (uint32_t)(key >> 32);
		if (met && ((!ends && f > bfree) || ties >= (ends ? TP_PL_END_TIES : PIN_TIES))) {
			stopped = true;
			break;
		}
		if (met && ends) { /* one of the tightest nodes that hold it: the ends decide */
			ties++;
			struct tp_end_key dk = tp_pl_node_end_key(p, d, p->q->end_s);
			if (!tp_pl_end_key_less(dk, bkey)) {
				if (!tp_pl_end_key_less(bkey, dk)) /* as suited: the walk's order decides */
					*(f > wfree ? &looser : &tied) = true;
				else
					by_end = true; /* it loses on the end */
				continue;
			}
			int e = tp_pl_eval(p, L, d, k, 0, v);
			if (e < 0)
				return e;
			if (e) {
				bdom = d;
				bkey = dk;
				wfree = f;
				by_end = true;
				tied = looser = false;
			}
			continue;
		}
		if (met && ((unsigned)L == p->nl || !tighter_ancestors(p, (unsigned)L, d, bdom))) {
			ties++; /* as tight, no tighter ancestors: it cannot win (a tie at best) */
			tied = true;
			continue;
		}
		int e = tp_pl_eval(p, L, d, k, 0, v);
		if (e < 0)
			return e;
		if (!e)
			continue;
		with_ancestors(p, (unsigned)L, d, k, v);
		int cmp = bdom == TP_NONE ? -1 : pin_cmp(p, (unsigned)L, v, best);
		if (cmp < 0) {
			if (bdom != TP_NONE) {
				c_copy(p, loser, best);
				has_loser = true;
			}
			c_copy(p, best, v);
			bdom = d;
			bfree = f;
			ties = 0;
			met = counts_meet(p, L - 1, k, 0, best);
			wfree = f;
			if (ends)
				bkey = tp_pl_node_end_key(p, d, p->q->end_s);
		} else {
			if (!has_loser || pin_cmp(p, (unsigned)L, v, loser) < 0) {
				c_copy(p, loser, v);
				has_loser = true;
			}
			tied = tied || cmp == 0;
			ties += f == bfree;
		}
	}
	if (p->err)
		return p->err;
	if (bdom == TP_NONE)
		return 0; /* nothing holds it: the tree solver explains why */
	p->pin_on = true;
	p->pin_level = L;
	p->pin_dom = bdom;
	/* what decided, for tp_placement_decided_by (the outermost choice) */
	tp_rule rule = tied ? TP_RULE_TIE : looser ? TP_RULE_FIT : by_end ? TP_RULE_END
	                                                   : stopped ? TP_RULE_FIT : TP_RULE_NONE;
	if (!tied && !looser && !by_end && has_loser) {
		unsigned i = 0;
		while (i < p->nlev && best[i] == loser[i])
			i++;
		rule = i < p->nlev ? TP_RULE_LOCALITY : TP_RULE_FIT;
	}
	p->pin_rule = rule;
	return 0;
}

/* For the single-child search of (l, d) when a domain is pinned at or below level l + 1: 1
 * with the pinned domain's ancestor at l + 1 in *kid and its cost in best, 0 when it cannot
 * hold k (then nothing can: the search answers 0), 2 when no pin applies, or an error. */
int tp_pl_pin_offer(struct pctx *p, int l, uint32_t k, unsigned col, uint32_t *best,
                    uint32_t *kid)
{
	if (tp_pl_pin_kid(p, l, k, kid) == 2)
		return 2;
	int e = tp_pl_eval(p, l + 1, *kid, k, tp_pl_child_col(p, l, col), best);
	if (e == 1 && l < 0 && p->pin_rule != TP_RULE_NONE) {
		p->dec_level = -1;
		p->dec_rule = p->pin_rule;
	}
	return e;
}

/* The child tp_pl_pin_offer offers, without evaluating it: 1 with it in *kid, 2 when no pin
 * applies. Emission needs no more: the offer held k when the answer was evaluated, and what
 * decided was recorded then. */
int tp_pl_pin_kid(struct pctx *p, int l, uint32_t k, uint32_t *kid)
{
	if (!p->pin_on || l + 1 > p->pin_level || k != p->q->count)
		return 2;
	uint32_t first, n;
	tp_dom_nodes(p->t, (unsigned)p->pin_level, p->pin_dom, &first, &n);
	*kid = l + 1 == p->pin_level ? p->pin_dom : tp_node_ancestor(p->t, first, (unsigned)(l + 1));
	return 1;
}
