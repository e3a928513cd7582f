/* SPDX-License-Identifier: MIT */
/*
 * The `nvidia-smi topo -m` importer: real outputs pasted in public issues (tests/data/nvsmi/,
 * sources in tests/data/README.md) and hand-made inputs, good and bad.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-nvsmi.h"
#include "topology_impl.h"

#ifndef TP_DATA_DIR
#define TP_DATA_DIR "tests/data"
#endif

static char *read_data(const char *name, size_t *len)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/nvsmi/%s", TP_DATA_DIR, name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	cr_assert(n > 0);
	rewind(f);
	char *buf = malloc((size_t)n);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static int load(const char *text, tp_nodetype **nt, char *err)
{
	*nt = (tp_nodetype *)1;
	return tp_nodetype_from_nvsmi_topo(nt, text, strlen(text), NULL, &tp_test_allocator, err,
	                                   256);
}

/*
 * Hand-made, in the spaced layout of older drivers and with the header underlined by escape
 * codes as newer nvidia-smi prints it on a terminal: two PIX pairs under one PXB group (a
 * switch with two switches below), mlx5_0 beside GPUs 0 and 1, mlx5_1 on the host bridge of
 * GPUs 2 and 3 (PHB), NV4 between GPUs 0 and 1 and NV2 between 2 and 3.
 */
static const char two_level[] =
	"\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
	"GPU0     X      NV4     PXB     PXB     PIX     PHB     0-15    0               N/A\n"
	"GPU1    NV4      X      PXB     PXB     PIX     PHB     0-15    0               N/A\n"
	"GPU2    PXB     PXB      X      NV2     PXB     PHB     0-15    0               N/A\n"
	"GPU3    PXB     PXB     NV2      X      PXB     PHB     0-15    0               N/A\n"
	"NIC0    PIX     PIX     PXB     PXB      X      PHB\n"
	"NIC1    PHB     PHB     PHB     PHB     PHB      X\n"
	"\n"
	"Legend:\n"
	"\n"
	"  X    = Self\n"
	"  NV#  = Connection traversing a bonded set of # NVLinks\n"
	"\n"
	"NIC Legend:\n"
	"\n"
	"  NIC0: mlx5_0\n"
	"  NIC1: mlx5_1\n";

Test(nvsmi, two_level_switches_nics_nvlink)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(two_level, &nt, err), 0, "%s", err);
	cr_assert_str_empty(err);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	/* PIX pairs GPU0+GPU1(+NIC0): a leaf switch; GPU2 and GPU3 PXB only: the upper switch */
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 2);
	cr_assert_eq(tp_test_switch_parent(nt, 0), -1);
	cr_assert_eq(tp_test_switch_parent(nt, 1), 0);
	cr_assert_eq(tp_test_gpu_switch(nt, 0), 1);
	cr_assert_eq(tp_test_gpu_switch(nt, 1), 1);
	cr_assert_eq(tp_test_gpu_switch(nt, 2), 0);
	cr_assert_eq(tp_test_gpu_switch(nt, 3), 0);
	cr_assert_eq(tp_nodetype_nic_count(nt), 2);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 0), "mlx5_0");
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 1), "mlx5_1");
	cr_assert_eq(tp_test_nic_switch(nt, 0), 1);
	cr_assert_eq(tp_test_nic_switch(nt, 1), -1);
	cr_assert_eq(tp_nodetype_nic_kind(nt, 0), TP_NIC_RDMA);
	/* GPU 2 reaches mlx5_0 through the upper switch: closer than mlx5_1 on the host bridge */
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 2), 0);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 100.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 2, 3), 50.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 2), 0.0, 1e-9);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

Test(nvsmi, link_bandwidth_option)
{
	tp_nvsmi_options o = TP_NVSMI_OPTIONS_INIT;
	cr_assert_float_eq(o.nvlink_link_gbps, 25.0, 1e-9);
	o.nvlink_link_gbps = 50;
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, two_level, sizeof two_level, &o, NULL, err,
	                                         sizeof err),
	             0, "%s", err);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 200.0, 1e-9);
	tp_nodetype_destroy(nt);
	o.nvlink_link_gbps = 0;
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, two_level, sizeof two_level, &o, NULL, err,
	                                          sizeof err),
	              TP_EINVAL, err, "opts.nvlink_link_gbps 0 is not a number > 0 and up to 156.25");
	o.nvlink_link_gbps = 25;
	o.version = 9;
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, two_level, sizeof two_level, &o, NULL, err,
	                                          sizeof err),
	              TP_EINVAL, err, "opts.version 9 is not 1");
	cr_assert_null(nt);
}

/* From NVIDIA/go-gpuallocator#17: 8 RTX 4090 on two sockets, all SYS; NIC0 and NIC1 (one
 * card: PIX) on GPU6's host bridge (PHB). No NIC Legend: the NICs keep their column names. */
Test(nvsmi, real_8x4090_two_nics)
{
	tp_test_alloc_reset();
	size_t len;
	char *text = read_data("8x4090-2nic.txt", &len);
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, text, len, NULL, &tp_test_allocator, err,
	                                         sizeof err),
	             0, "%s", err);
	free(text);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 8);
	cr_assert_eq(tp_nodetype_nic_count(nt), 2);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 0), "NIC0");
	/* NIC0 and NIC1 share a PIX switch; no GPU is behind a switch */
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 1);
	cr_assert_eq(tp_test_nic_switch(nt, 0), 0);
	cr_assert_eq(tp_test_nic_switch(nt, 1), 0);
	for (unsigned g = 0; g < 8; g++) {
		cr_assert_eq(tp_test_gpu_switch(nt, g), -1);
		for (unsigned h = 0; h < 8; h++)
			cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, g, h), 0.0, 1e-9);
	}
	/* GPU6 shares the NICs' host bridge; GPUs 4-7 their NUMA node (NUMA Affinity 1, which the
	 * NICs get from GPU6, their PHB neighbour), GPUs 0-3 nothing */
	cr_assert_eq(nt->gpu_x[6].loc.host_bridge, nt->nic_x[0].loc.host_bridge);
	cr_assert_eq(nt->gpu_x[5].loc.numa, nt->nic_x[0].loc.numa);
	cr_assert_neq(nt->gpu_x[0].loc.numa, nt->nic_x[0].loc.numa);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 6), 0);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* From noonghunna/club-3090#1229: a 2-GPU workstation (RTX 5090), PHB, no NIC. */
Test(nvsmi, real_2x5090_workstation)
{
	size_t len;
	char *text = read_data("2x5090-workstation.txt", &len);
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, text, len, NULL, NULL, err, sizeof err), 0,
	             "%s", err);
	free(text);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 2);
	cr_assert_eq(tp_nodetype_nic_count(nt), 0);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), TP_ENOTFOUND);
	cr_assert_eq(nt->gpu_x[0].loc.host_bridge, nt->gpu_x[1].loc.host_bridge);
	tp_nodetype_destroy(nt);
}

/* Replace the first `from` of two_level by `to` into buf. */
static const char *edited(char *buf, size_t len, const char *from, const char *to)
{
	const char *at = strstr(two_level, from);
	cr_assert(at, "snippet lacks '%s'", from);
	snprintf(buf, len, "%.*s%s%s", (int)(at - two_level), two_level, to, at + strlen(from));
	return buf;
}

Test(nvsmi, bad_inputs_name_line_column_and_why)
{
	static const struct {
		const char *from, *to, *message;
	} cases[] = {
		{"\x1b[4m\tGPU0", "$ nvidia-smi topo -m\n\tGPU0",
		 "line 1, column 1: expected the header of nvidia-smi topo -m (GPU0 GPU1 ... CPU "
		 "Affinity), got '$'"},
		{"GPU0     X      NV4     PXB", "GPU0     X      NVX     PXB",
		 "line 2, column 17: 'NVX' is not a topology entry (X, NV#, PIX, PXB, PHB, NODE, SYS)"},
		{"GPU0     X      NV4     PXB", "GPU0     X      NV99    PXB",
		 "line 2, column 17: 'NV99': an NVLink count from 1 to 64"},
		{"GPU1    NV4      X      PXB", "GPU1    NV2      X      PXB",
		 "line 3, column 9: GPU1 -> GPU0 is 'NV2' but GPU0 -> GPU1 (line 2) is 'NV4': the "
		 "matrix is not symmetric"},
		{"GPU2    PXB     PXB      X ", "GPU2    PXB     PXB     PIX ",
		 "line 4, column 25: an entry other than 'X' between GPU2 and GPU2 ('X' is the "
		 "diagonal only)"},
		{"NIC0    PIX     PIX     PXB     PXB      X      PHB",
		 "NIC0    PIX     PIX     PXB     PXB      X      NV1",
		 "line 6, column 49: NVLink 'NV1' between NIC0 and NIC1 (NVLink joins GPUs only)"},
		{"GPU3    PXB     PXB     NV2      X      PXB     PHB     0-15    0               N/A\n",
		 "GPU3    PXB     PXB     NV2      X      PXB\n",
		 "line 5: the row of GPU3 has 5 entries, the header 6 GPU and NIC columns"},
		{"GPU3    PXB", "GPU4    PXB",
		 "line 5, column 1: expected the row of GPU3 (the header's column 4), got 'GPU4'"},
		{"NIC1    PHB     PHB     PHB     PHB     PHB      X\n", "\n",
		 "line 7: the matrix ends before the row of NIC1 (5 rows of 6)"},
		{"0-15    0               N/A\nGPU1", "0-15    0               N/A  x\nGPU1",
		 "line 2, column 86: 'x' after the last column of the header"},
		{"  NIC1: mlx5_1\n", "  NIC7: mlx5_1\n",
		 "line 17, column 3: the NIC Legend names NIC7, which is not a column"},
		{"  NIC1: mlx5_1\n", "  NIC0: mlx5_9\n",
		 "line 17, column 3: NIC0 is named twice in the NIC Legend"},
		{"  NIC1: mlx5_1\n", "  NIC1 mlx5_1\n",
		 "line 17, column 3: expected 'NIC<k>: <name>' in the NIC Legend"},
		{"\nLegend:\n", "\nsomething else\nLegend:\n",
		 "line 9, column 1: 'something' after the matrix (only the Legend and the NIC Legend "
		 "may follow its rows)"},
		{"\tNIC0\tNIC1\t", "\tNIC0\tNIC0\t", "line 1, column 31: column 'NIC0' appears twice"},
		{"\tGPU1\tGPU2", "\tGPU2\tGPU1",
		 "line 1, column 11: GPU column 'GPU2' out of order (expected GPU0, GPU1, ... before "
		 "the NICs)"},
		{"CPU Affinity\tNUMA Affinity", "NUMA Affinity\tCPU Affinity",
		 "line 1, column 50: 'CPU' where the header has only CPU Affinity, NUMA Affinity and "
		 "GPU NUMA ID after the matrix columns"},
		{"GPU0     X ", "GPU0  \x01  X ", "line 2, column 7: a control character (0x01)"},
	};
	static char buf[4096];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = NULL;
		char err[256];
		const char *text = edited(buf, sizeof buf, cases[i].from, cases[i].to);
		TP_ASSERT_ERR(load(text, &nt, err), TP_EPARSE, err, cases[i].message);
		cr_assert_null(nt, "case %zu", i);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(nvsmi, bad_arguments_and_limits)
{
	tp_nodetype *nt = (tp_nodetype *)1;
	char err[256];
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(NULL, "x", 1, NULL, NULL, err, sizeof err),
	              TP_EINVAL, err, "out is NULL");
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, NULL, 1, NULL, NULL, err, sizeof err),
	              TP_EINVAL, err, "text is NULL");
	cr_assert_null(nt);
	tp_allocator bad = {0};
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, "x", 1, NULL, &bad, err, sizeof err),
	              TP_EINVAL, err, "alloc lacks a function");
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, "", 1, NULL, NULL, err, sizeof err),
	              TP_EPARSE, err, "the text is empty");
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, "\n \t\n", 4, NULL, NULL, err, sizeof err),
	              TP_EPARSE, err, "the text has only blank lines");
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, "GPU0\0x", 6, NULL, NULL, err, sizeof err),
	              TP_EPARSE, err, "the text has a NUL byte at offset 4, before its end (6 bytes)");
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, two_level, (size_t)1 << 21, NULL, NULL, err,
	                                          sizeof err),
	              TP_ELIMIT, err, "the text has 2097152 bytes (at most 1048576)");
	/* 257 GPU columns */
	static char big[8192];
	size_t n = 0;
	for (unsigned g = 0; g <= TP_MAX_NODE_DEVICES; g++)
		n += (size_t)snprintf(big + n, sizeof big - n, "\tGPU%u", g);
	snprintf(big + n, sizeof big - n, "\n");
	TP_ASSERT_ERR(tp_nodetype_from_nvsmi_topo(&nt, big, strlen(big), NULL, NULL, err,
	                                          sizeof err),
	              TP_ELIMIT, err, "line 1: 257 GPU columns (at most 256)");
	/* the message buffer may be absent or small */
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, "x", 1, NULL, NULL, NULL, 0), TP_EPARSE);
	char small[8];
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, "x", 1, NULL, NULL, small, sizeof small),
	             TP_EPARSE);
	cr_assert_eq(strlen(small), sizeof small - 1);
}

/* A NUL-terminated buffer passed with its terminator, CR-LF line ends, trailing blank lines. */
Test(nvsmi, c_strings_and_crlf)
{
	static char buf[4096];
	size_t n = 0;
	for (const char *p = two_level; *p; p++) {
		if (*p == '\n')
			buf[n++] = '\r';
		buf[n++] = *p;
	}
	memcpy(buf + n, "\r\n\r\n", 5);
	n += 5; /* with the NUL */
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, buf, n, NULL, NULL, err, sizeof err), 0, "%s",
	             err);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 1), "mlx5_1");
	tp_nodetype_destroy(nt);
}

Test(nvsmi, allocation_failures)
{
	for (long k = 0;; k++) {
		tp_test_alloc_reset();
		tp_test_alloc_fail_at(k);
		tp_nodetype *nt = NULL;
		char err[256];
		int rc = load(two_level, &nt, err);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			cr_assert_gt(k, 3);
			tp_nodetype_destroy(nt);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s (%s)", k, tp_err_name(rc), err);
		cr_assert(strstr(err, "out of memory"), "allocation %ld: %s", k, err);
		cr_assert_null(nt);
		TP_ASSERT_NO_LEAKS();
	}
}

/* Found by fuzz_nvsmi: a NUMA Affinity that ends the buffer (no newline, no NUL after it) was
 * read past the end. The copy is exactly the text's size, so ASan sees any byte beyond. */
Test(nvsmi, numa_affinity_at_the_end_of_the_buffer)
{
	static const char text[] = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
	                           "GPU0\t X \tPHB\t0-63\t1\n"
	                           "GPU1\tPHB\t X \t0-63\t1";
	size_t len = sizeof text - 1;
	char *copy = malloc(len);
	cr_assert_not_null(copy);
	memcpy(copy, text, len);
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_nvsmi_topo(&nt, copy, len, NULL, NULL, err, sizeof err), 0,
	             "%s", err);
	free(copy);
	cr_assert_eq(nt->gpu_x[1].loc.numa, 1);
	tp_nodetype_destroy(nt);
}

/* Found by fuzz_nvsmi: a control character after "NIC" in the legends set a message but the
 * call succeeded. */
Test(nvsmi, control_character_in_the_legends)
{
	tp_nodetype *nt = NULL;
	char err[256];
	static char buf[4096];
	const char *text = edited(buf, sizeof buf, "NIC Legend:\n", "NIC \x1f Legend:\n");
	TP_ASSERT_ERR(load(text, &nt, err), TP_EPARSE, err,
	              "line 14, column 5: a control character (0x1f)");
	cr_assert_null(nt);
}
