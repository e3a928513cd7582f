/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the hwloc importer on small XML machines written here (the real machines of
 * ../shared/hwloc are read by test_hwloc_shared.c). Each snippet is what lstopo 2.x writes,
 * cut down; `lstopo-no-graphics --input FILE --whole-io` on them shows the trees drawn in the
 * comments.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <hwloc.h>

#include "testutil.h"
#include "topoplace-hwloc.h"
#include "topology_impl.h"

/*
 * Two PCIe switches, four GPUs (two with NVML OS devices, two without any), an InfiniBand NIC
 * behind the first switch, an Ethernet NIC on the host bridge, an NVSwitch (no subtype: found
 * by vendor 10de and class 0680) behind the second switch, and an NVLinkBandwidth matrix:
 *
 *   HostBridge
 *     PCIBridge (root port)
 *       PCIBridge 01:00.0 (switch 0)  -> GPU 03:00.0 "nvml0", GPU 04:00.0 "nvml1", NIC "mlx5_0"
 *     PCIBridge (root port)
 *       PCIBridge 08:00.0 (switch 1)  -> GPU 0a:00.0, GPU 0b:00.0, NVSwitch 0c:00.0
 *     PCI 00:1f.0 -> Net "eth0"
 *
 * NVLink (MB/s): nvml0-nvml1 50000 direct; nvml0, 0a, 0b each 25000 to the NVSwitch.
 */
static const char mini_xml[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	"<topology version=\"2.0\">\n"
	" <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"allowed_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
	"allowed_nodeset=\"0x1\" gp_index=\"1\">\n"
	"  <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\" "
	"local_memory=\"1073741824\"/>\n"
	"  <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\"/>\n"
	"  <object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\" "
	"bridge_pci=\"0000:[00-0f]\">\n"
	"   <object type=\"Bridge\" gp_index=\"11\" bridge_type=\"1-1\" depth=\"1\" "
	"bridge_pci=\"0000:[01-07]\" pci_busid=\"0000:00:01.0\" pci_type=\"0604 [8086:0001] "
	"[0000:0000] 00\">\n"
	"    <object type=\"Bridge\" gp_index=\"12\" bridge_type=\"1-1\" depth=\"2\" "
	"bridge_pci=\"0000:[02-07]\" pci_busid=\"0000:01:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"     <object type=\"Bridge\" gp_index=\"13\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[03-03]\" pci_busid=\"0000:02:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"14\" pci_busid=\"0000:03:00.0\" "
	"pci_type=\"0302 [10de:1db8] [10de:131d] a1\">\n"
	"       <object type=\"OSDev\" gp_index=\"15\" name=\"nvml0\" osdev_type=\"1\" "
	"subtype=\"NVML\"/>\n"
	"      </object>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"16\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[04-04]\" pci_busid=\"0000:02:01.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"17\" pci_busid=\"0000:04:00.0\" "
	"pci_type=\"0302 [10de:1db8] [10de:131d] a1\">\n"
	"       <object type=\"OSDev\" gp_index=\"18\" name=\"nvml1\" osdev_type=\"1\" "
	"subtype=\"NVML\"/>\n"
	"      </object>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"19\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[05-05]\" pci_busid=\"0000:02:02.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"20\" pci_busid=\"0000:05:00.0\" "
	"pci_type=\"0207 [15b3:101b] [15b3:0007] 00\">\n"
	"       <object type=\"OSDev\" gp_index=\"21\" name=\"mlx5_0\" osdev_type=\"3\"/>\n"
	"      </object>\n"
	"     </object>\n"
	"    </object>\n"
	"   </object>\n"
	"   <object type=\"Bridge\" gp_index=\"30\" bridge_type=\"1-1\" depth=\"1\" "
	"bridge_pci=\"0000:[08-0f]\" pci_busid=\"0000:00:02.0\" pci_type=\"0604 [8086:0001] "
	"[0000:0000] 00\">\n"
	"    <object type=\"Bridge\" gp_index=\"31\" bridge_type=\"1-1\" depth=\"2\" "
	"bridge_pci=\"0000:[09-0f]\" pci_busid=\"0000:08:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"     <object type=\"Bridge\" gp_index=\"32\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[0a-0a]\" pci_busid=\"0000:09:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"33\" pci_busid=\"0000:0a:00.0\" "
	"pci_type=\"0302 [10de:1db8] [10de:131d] a1\"/>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"34\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[0b-0b]\" pci_busid=\"0000:09:01.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"35\" pci_busid=\"0000:0b:00.0\" "
	"pci_type=\"0302 [10de:1db8] [10de:131d] a1\"/>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"36\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[0c-0c]\" pci_busid=\"0000:09:02.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"37\" pci_busid=\"0000:0c:00.0\" "
	"pci_type=\"0680 [10de:1ac2] [0000:0000] a1\"/>\n"
	"     </object>\n"
	"    </object>\n"
	"   </object>\n"
	"   <object type=\"PCIDev\" gp_index=\"40\" pci_busid=\"0000:00:1f.0\" pci_type=\"0200 "
	"[8086:1533] [8086:0000] 00\">\n"
	"    <object type=\"OSDev\" gp_index=\"41\" name=\"eth0\" osdev_type=\"2\"/>\n"
	"   </object>\n"
	"  </object>\n"
	" </object>\n"
	" <distances2hetero nbobjs=\"5\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
	"  <indexes length=\"47\">OSDev:15 OSDev:18 PCIDev:33 PCIDev:35 PCIDev:37</indexes>\n"
	"  <u64values length=\"81\">0 50000 0 0 25000 50000 0 0 0 0 0 0 0 0 25000 0 0 0 0 "
	"25000 25000 0 25000 25000 0</u64values>\n"
	" </distances2hetero>\n"
	"</topology>\n";

static const char nested_xml[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<topology version=\"2.0\">\n"
	" <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"allowed_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
	"allowed_nodeset=\"0x1\" gp_index=\"1\">\n"
	"  <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\" "
	"local_memory=\"1073741824\"/>\n"
	"  <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\"/>\n"
	"  <object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\" "
	"bridge_pci=\"0000:[00-0f]\">\n"
	"   <object type=\"Bridge\" gp_index=\"11\" bridge_type=\"1-1\" depth=\"1\" "
	"bridge_pci=\"0000:[01-07]\" pci_busid=\"0000:00:01.0\" pci_type=\"0604 [8086:0001] "
	"[0000:0000] 00\">\n"
	"    <object type=\"Bridge\" gp_index=\"12\" bridge_type=\"1-1\" depth=\"2\" "
	"bridge_pci=\"0000:[02-07]\" pci_busid=\"0000:01:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"     <object type=\"Bridge\" gp_index=\"13\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[03-05]\" pci_busid=\"0000:02:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"Bridge\" gp_index=\"14\" bridge_type=\"1-1\" depth=\"4\" "
	"bridge_pci=\"0000:[04-05]\" pci_busid=\"0000:03:00.0\" pci_type=\"0604 [10b5:8725] "
	"[10b5:8725] 00\">\n"
	"       <object type=\"Bridge\" gp_index=\"15\" bridge_type=\"1-1\" depth=\"5\" "
	"bridge_pci=\"0000:[05-05]\" pci_busid=\"0000:04:00.0\" pci_type=\"0604 [10b5:8725] "
	"[10b5:8725] 00\">\n"
	"        <object type=\"PCIDev\" gp_index=\"16\" pci_busid=\"0000:05:00.0\" "
	"pci_type=\"0302 [10de:20b0] [10de:1450] a1\">\n"
	"         <object type=\"OSDev\" gp_index=\"17\" name=\"cuda0\" osdev_type=\"5\" "
	"subtype=\"CUDA\"/>\n"
	"        </object>\n"
	"       </object>\n"
	"      </object>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"18\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[06-06]\" pci_busid=\"0000:02:01.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"19\" pci_busid=\"0000:06:00.0\" "
	"pci_type=\"0302 [10de:20b0] [10de:1450] a1\">\n"
	"       <object type=\"OSDev\" gp_index=\"20\" name=\"nvml1\" osdev_type=\"5\"/>\n"
	"      </object>\n"
	"     </object>\n"
	"     <object type=\"Bridge\" gp_index=\"21\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[07-07]\" pci_busid=\"0000:02:02.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"22\" pci_busid=\"0000:07:00.0\" "
	"pci_type=\"0100 [1000:0062] [0014:0066] 04\"/>\n"
	"     </object>\n"
	"    </object>\n"
	"   </object>\n"
	"   <object type=\"Bridge\" gp_index=\"30\" bridge_type=\"1-1\" depth=\"1\" "
	"bridge_pci=\"0000:[08-0f]\" pci_busid=\"0000:00:02.0\" pci_type=\"0604 [8086:0001] "
	"[0000:0000] 00\">\n"
	"    <object type=\"Bridge\" gp_index=\"31\" bridge_type=\"1-1\" depth=\"2\" "
	"bridge_pci=\"0000:[09-0f]\" pci_busid=\"0000:08:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"     <object type=\"Bridge\" gp_index=\"32\" bridge_type=\"1-1\" depth=\"3\" "
	"bridge_pci=\"0000:[0a-0a]\" pci_busid=\"0000:09:00.0\" pci_type=\"0604 [10b5:9781] "
	"[10b5:9781] 00\">\n"
	"      <object type=\"PCIDev\" gp_index=\"33\" pci_busid=\"0000:0a:00.0\" "
	"pci_type=\"0100 [1000:0062] [0014:0066] 04\"/>\n"
	"     </object>\n"
	"    </object>\n"
	"   </object>\n"
	"   <object type=\"PCIDev\" gp_index=\"40\" pci_busid=\"0000:00:03.0\" pci_type=\"0300 "
	"[1002:515e] [0014:0019] 02\">\n"
	"    <object type=\"OSDev\" gp_index=\"41\" name=\"card0\" osdev_type=\"1\"/>\n"
	"   </object>\n"
	"  </object>\n"
	" </object>\n"
	"</topology>\n";

static const char nic_only_xml[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	"<topology version=\"2.0\">\n"
	" <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"allowed_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
	"allowed_nodeset=\"0x1\" gp_index=\"1\">\n"
	"  <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\" "
	"local_memory=\"1073741824\"/>\n"
	"  <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
	"nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\"/>\n"
	"  <object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\" "
	"bridge_pci=\"0000:[00-0f]\">\n"
	"   <object type=\"PCIDev\" gp_index=\"40\" pci_busid=\"0000:00:1f.0\" pci_type=\"0200 "
	"[8086:1533] [8086:0000] 00\">\n"
	"    <object type=\"OSDev\" gp_index=\"41\" name=\"eth0\" osdev_type=\"2\"/>\n"
	"   </object>\n"
	"  </object>\n"
	" </object>\n"
	"</topology>\n";

/* Load an XML snippet with the test allocator; the message goes to err. */
static int load(const char *xml, tp_nodetype **nt, char *err)
{
	return tp_nodetype_from_hwloc_xml(nt, xml, strlen(xml), &tp_test_allocator, err, 256);
}

Test(hwloc, two_switch_machine_gpus_switches_nics)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(mini_xml, &nt, err), 0, "%s", err);
	cr_assert_str_empty(err);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 2);
	cr_assert_eq(tp_test_switch_parent(nt, 0), -1);
	cr_assert_eq(tp_test_switch_parent(nt, 1), -1);
	/* GPUs in file order: the two NVML ones behind switch 0, the two bare ones behind 1. */
	cr_assert_eq(tp_test_gpu_switch(nt, 0), 0);
	cr_assert_eq(tp_test_gpu_switch(nt, 1), 0);
	cr_assert_eq(tp_test_gpu_switch(nt, 2), 1);
	cr_assert_eq(tp_test_gpu_switch(nt, 3), 1);
	cr_assert_eq(tp_nodetype_nic_count(nt), 2);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 0), "mlx5_0");
	cr_assert_eq(tp_test_nic_switch(nt, 0), 0);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 1), "eth0");
	cr_assert_eq(tp_test_nic_switch(nt, 1), -1);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 1), 0);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

Test(hwloc, two_switch_machine_nvlink_and_nvswitch)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(mini_xml, &nt, err), 0, "%s", err);
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 1);
	cr_assert_str_eq(nt->nvs_name[0], "0000:0c:00.0");
	/* Direct link, MB/s -> GB/s. GPU 0 reaches the NVSwitch but GPU 1 does not. */
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 50.0, 1e-9);
	/* Through the NVSwitch: the smaller of the two GPUs' switch bandwidths. */
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 2), 25.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 3), 25.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 2, 3), 25.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 3, 2), 25.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 1, 2), 0.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 1, 3), 0.0, 1e-9);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 *   HostBridge
 *     PCIBridge (root port)
 *       PCIBridge 01:00.0 (switch 0)
 *         PCIBridge 02:00.0 (its downstream port)
 *           PCIBridge 03:00.0 (switch 1, below switch 0) -> GPU 05:00.0 "cuda0" (CUDA)
 *         PCIBridge 02:01.0 -> GPU 06:00.0 "nvml1" (CoProc, no subtype: known by its name)
 *         PCIBridge 02:02.0 -> SCSI 07:00.0
 *     PCIBridge (root port)
 *       PCIBridge 08:00.0 (a switch with only SCSI below: not kept) -> SCSI 0a:00.0
 *     PCI 00:03.0 (VGA, vendor 1002: not an NVIDIA GPU) -> GPU "card0"
 */
Test(hwloc, nested_switches_and_other_vendors)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(nested_xml, &nt, err), 0, "%s", err);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 2);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 2);
	cr_assert_eq(tp_test_switch_parent(nt, 0), -1);
	cr_assert_eq(tp_test_switch_parent(nt, 1), 0);
	cr_assert_eq(tp_test_gpu_switch(nt, 0), 1);
	cr_assert_eq(tp_test_gpu_switch(nt, 1), 0);
	cr_assert_eq(tp_nodetype_nic_count(nt), 0);
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 0);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 0.0, 1e-9);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

Test(hwloc, machine_without_nvidia_gpu_is_not_found)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = (tp_nodetype *)1;
	char err[256];
	TP_ASSERT_ERR(load(nic_only_xml, &nt, err), TP_ENOTFOUND, err, "no GPU, NVIDIA or AMD");
	cr_assert(strstr(err, "1 NICs"), "%s", err);
	cr_assert_null(nt);
	TP_ASSERT_NO_LEAKS();
}

/* Replace the first occurrence of `from` in mini_xml by `to` into buf. */
static const char *edited(char *buf, size_t len, const char *from, const char *to)
{
	const char *at = strstr(mini_xml, from);
	cr_assert(at, "snippet lacks '%s'", from);
	snprintf(buf, len, "%.*s%s%s", (int)(at - mini_xml), mini_xml, to, at + strlen(from));
	return buf;
}

Test(hwloc, malformed_xml_is_a_parse_error)
{
	static const struct {
		const char *from, *to, *fragment;
	} cases[] = {
		{"<topology version=\"2.0\">", "<topology version=\"1.0\">", "other than hwloc writes"},
		{"<topology version=\"2.0\">", "<topology version=\"2.0\"", "without its '>'"},
		{" complete_nodeset=\"0x1\" allowed_nodeset", " allowed_nodeset", "cpusets or nodesets"},
		{"cpuset=\"0x1\" complete_cpuset", "cpuset=\"0xf...f,\" complete_cpuset", "malformed"},
		{"cpuset=\"0x1\" complete_cpuset", "cpuset=\"1\" complete_cpuset", "malformed"},
		{"type=\"NUMANode\"", "type=\"Group\"", "no NUMANode"},
		{"type=\"PU\"", "type=\"Core\"", "no PU"},
		{"<indexes length=\"47\">", "<indexes length=\"46\">", "could not parse"},
		{"name=\"mlx5_0\" osdev_type=\"3\"/>", "name=\"mlx5_0\" osdev_type=\"3\">",
		 "closing tag that does not match"},
		/* the well-formedness screen (hwloc's own parser trusts nesting and quoting) */
		{"</indexes>", "</index>", "closing tag that does not match"},
		{"</topology>\n", "", "never closed"},
		{"</topology>\n", "</topology>\n<topology version=\"2.0\"/>", "content after the root"},
		{"</topology>\n", "</topology>\nx", "content after the root"},
		{"<indexes length", "<!-- c --><indexes length", "without a name"},
		{"<indexes length", "<![CDATA[x]]><indexes length", "without a name"},
		{"<indexes length", "<in-dexes length", "malformed tag name"},
		{"gp_index=\"2\"", "gp_index=2", "malformed attribute"},
		{"gp_index=\"2\"", "gp_index=\"2\" x", "malformed attribute"},
		{"OSDev:15 OSDev", "OSDev:15 &bogus; OSDev", "unknown entity"},
		{"OSDev:15 OSDev", "OSDev:15 > OSDev", "text with '>'"},
		{"OSDev:15 OSDev", "OSDev:15 \x01 OSDev", "control character"},
	};
	static char buf[8192];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = (tp_nodetype *)1;
		char err[256];
		const char *xml = edited(buf, sizeof buf, cases[i].from, cases[i].to);
		TP_ASSERT_ERR(load(xml, &nt, err), TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(nt);
		TP_ASSERT_NO_LEAKS();
	}
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	TP_ASSERT_ERR(load("not xml at all <<<\"", &nt, err), TP_EPARSE, err, "refused");
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, mini_xml, 0, NULL, err, sizeof err),
	              TP_EPARSE, err, "empty");
	TP_ASSERT_NO_LEAKS();
}

/* hwloc's parser recurses once per open element: deep nesting is refused before it runs. */
Test(hwloc, deep_nesting_is_refused)
{
	static char buf[16384];
	size_t n = (size_t)snprintf(buf, sizeof buf, "<topology version=\"2.0\">");
	for (int i = 0; i < 200; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "<info>");
	for (int i = 0; i < 200; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "</info>");
	snprintf(buf + n, sizeof buf - n, "</topology>\n");
	tp_test_alloc_reset();
	tp_nodetype *nt = (tp_nodetype *)1;
	char err[256];
	TP_ASSERT_ERR(load(buf, &nt, err), TP_EPARSE, err, "nested more than 128 deep");
	cr_assert_null(nt);
	TP_ASSERT_NO_LEAKS();
}

/* A NUL inside the buffer is refused; NULs at its end (a C string's terminator) are not. */
Test(hwloc, nul_bytes)
{
	static char buf[8192];
	size_t len = strlen(mini_xml);
	memcpy(buf, mini_xml, len + 1);
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_hwloc_xml(&nt, buf, len + 1, &tp_test_allocator, err,
	                                        sizeof err), 0, "%s", err);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	tp_nodetype_destroy(nt);
	nt = (tp_nodetype *)1;
	buf[100] = '\0';
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, buf, len, &tp_test_allocator, err, sizeof err),
	              TP_EPARSE, err, "NUL byte at offset 100");
	cr_assert_null(nt);
	TP_ASSERT_NO_LEAKS();
}

Test(hwloc, every_truncation_is_a_parse_error)
{
	/* Cut anywhere before the final </topology> (hwloc does not insist on that one). */
	size_t end = (size_t)(strstr(mini_xml, "</distances2hetero>") - mini_xml);
	for (size_t len = 1; len < end; len++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = (tp_nodetype *)1;
		char err[256] = "";
		int rc = tp_nodetype_from_hwloc_xml(&nt, mini_xml, len, &tp_test_allocator, err,
		                                    sizeof err);
		cr_assert_eq(rc, TP_EPARSE, "prefix of %zu bytes: %s (%s)", len, tp_err_name(rc), err);
		cr_assert(err[0] && strstr(err, "bytes"), "prefix of %zu bytes: message '%s'", len, err);
		cr_assert_null(nt);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(hwloc, bad_arguments)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(NULL, mini_xml, 10, NULL, err, sizeof err),
	              TP_EINVAL, err, "out");
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, NULL, 10, NULL, err, sizeof err), TP_EINVAL,
	              err, "xml");
	tp_allocator broken = tp_test_allocator;
	broken.realloc = NULL;
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, mini_xml, strlen(mini_xml), &broken, err,
	                                         sizeof err),
	              TP_EINVAL, err, "alloc");
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, mini_xml, (size_t)INT_MAX + 1, NULL, err,
	                                         sizeof err),
	              TP_ELIMIT, err, "the XML buffer has 2147483648 bytes (at most 67108864)");
	TP_ASSERT_ERR(tp_nodetype_from_hwloc(&nt, NULL, NULL, err, sizeof err), TP_EINVAL, err,
	              "topo");
	cr_assert_null(nt);
	TP_ASSERT_NO_LEAKS();
}

Test(hwloc, message_buffer_may_be_small_or_absent)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char small[8];
	memset(small, 'x', sizeof small);
	cr_assert_eq(tp_nodetype_from_hwloc_xml(&nt, nic_only_xml, strlen(nic_only_xml),
	                                        &tp_test_allocator, small, sizeof small),
	             TP_ENOTFOUND);
	cr_assert_eq(strlen(small), sizeof small - 1);
	cr_assert_str_eq(small, "the hwl");
	cr_assert_eq(tp_nodetype_from_hwloc_xml(&nt, nic_only_xml, strlen(nic_only_xml),
	                                        &tp_test_allocator, NULL, 0),
	             TP_ENOTFOUND);
	TP_ASSERT_NO_LEAKS();
}

Test(hwloc, allocation_failures)
{
	tp_test_alloc_reset();
	for (long n = 0;; n++) {
		tp_nodetype *nt = (tp_nodetype *)1;
		char err[256];
		tp_test_alloc_fail_at(n);
		int rc = load(mini_xml, &nt, err);
		if (tp_test_alloc_state.failed == 0) {
			cr_assert_eq(rc, 0, "%s", err);
			cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
			cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 50.0, 1e-9);
			tp_nodetype_destroy(nt);
			cr_assert_gt(n, 3, "the import made too few allocations to be tested");
			break;
		}
		TP_ASSERT_ERR(rc, TP_ENOMEM, err, "out of memory");
		cr_assert_null(nt);
		TP_ASSERT_NO_LEAKS();
	}
	TP_ASSERT_NO_LEAKS();
}

/* Load a snippet with hwloc as a caller would, with the given filter for I/O objects. */
static hwloc_topology_t caller_topology(const char *xml, enum hwloc_type_filter_e io)
{
	hwloc_topology_t topo;
	cr_assert_eq(hwloc_topology_init(&topo), 0);
	cr_assert_eq(hwloc_topology_set_io_types_filter(topo, io), 0);
	cr_assert_eq(hwloc_topology_set_xmlbuffer(topo, xml, (int)strlen(xml) + 1), 0);
	cr_assert_eq(hwloc_topology_load(topo), 0);
	return topo;
}

Test(hwloc, topology_loaded_by_the_caller)
{
	tp_test_alloc_reset();
	hwloc_topology_t topo = caller_topology(mini_xml, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(tp_nodetype_from_hwloc(&nt, topo, &tp_test_allocator, err, sizeof err), 0,
	             "%s", err);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 2);
	cr_assert_eq(tp_nodetype_nic_count(nt), 2);
	tp_nodetype_destroy(nt);
	hwloc_topology_destroy(topo);

	/* hwloc's default drops I/O objects: nothing to find, and the message says why. */
	topo = caller_topology(mini_xml, HWLOC_TYPE_FILTER_KEEP_NONE);
	TP_ASSERT_ERR(tp_nodetype_from_hwloc(&nt, topo, &tp_test_allocator, err, sizeof err),
	              TP_ENOTFOUND, err, "I/O objects");
	cr_assert_null(nt);
	hwloc_topology_destroy(topo);
	TP_ASSERT_NO_LEAKS();
}

Test(hwloc, node_type_goes_into_a_topology)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(mini_xml, &nt, err), 0, "%s", err);
	const char *levels[] = {"rack", "node"};
	const char *path[] = {"r0"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	cr_assert_eq(tp_topology_builder_add_node(b, "n0", path, 4, &o), 0, "%s",
	             tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	const tp_nodetype *in = tp_topology_node_type(t, 0);
	cr_assert_not_null(in);
	cr_assert_eq(tp_nodetype_gpu_count(in), 4);
	cr_assert_eq(tp_test_gpu_switch(in, 3), 1);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* Only the DOCTYPE lines hwloc writes pass (#19 item 12): an internal subset or another SYSTEM
 * id would reach an hwloc built on libxml2. */
Test(hwloc, only_hwlocs_doctype_passes)
{
	static const char *const bad[] = {
		"<!DOCTYPE topology SYSTEM \"http://example.com/x.dtd\">\n",
		"<!DOCTYPE topology [<!ENTITY x \"y\">]>\n",
		"<!DOCTYPE topology SYSTEM \"hwloc2.dtd\" [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n",
		"<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">  \n",
		"<!DOCTYPE\ttopology SYSTEM \"hwloc2.dtd\">\n",
	};
	static char buf[8192];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = (tp_nodetype *)1;
		char err[256];
		const char *xml =
			edited(buf, sizeof buf, "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n", bad[i]);
		TP_ASSERT_ERR(load(xml, &nt, err), TP_EPARSE, err,
		              "a DOCTYPE other than the one hwloc writes");
		cr_assert_null(nt);
		TP_ASSERT_NO_LEAKS();
	}
	/* both of hwloc's, and CR-LF line ends */
	static const char *const good[] = {"<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n",
	                                   "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\r\n"};
	for (size_t i = 0; i < 2; i++) {
		tp_nodetype *nt = NULL;
		char err[256];
		const char *xml =
			edited(buf, sizeof buf, "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n", good[i]);
		cr_assert_eq(load(xml, &nt, err), 0, "%s", err);
		tp_nodetype_destroy(nt);
	}
}

/* A file of another format is named as what it looks like. */
Test(hwloc, other_formats_are_named)
{
	static const struct {
		const char *text, *fragment;
	} cases[] = {
		{"<?xml version=\"1.0\"?>\n<system version=\"1\">\n <cpu numaid=\"0\"/>\n</system>\n",
		 "NCCL's topology XML"},
		{"---\nswitches:\n  - switch: s0\n", "looks like YAML"},
		{"topology:\n  block: {}\n", "looks like YAML"},
		{"{\"version\": 1}", "looks like JSON"},
		{"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\n\nLegend:\n", "nvidia-smi topo -m"},
		{"SwitchName=s0 Nodes=n[1-4]\n", "Slurm topology.conf"},
		{"<root>\n</root>\n", "hwloc 0.9 XML"},
		{"<?xml version=\"1.0\"?>\n<svg width=\"1\"/>\n", "root element is not <topology>"},
		{"<topology version=\"3.0\">\n</topology>\n", "hwloc 3.x XML (<topology version=\"3.x\">"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_nodetype *nt = (tp_nodetype *)1;
		char err[256];
		TP_ASSERT_ERR(load(cases[i].text, &nt, err), TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(nt);
	}
}

/* NVLink figures above 10 TB/s are refused, naming the pair and the value. */
Test(hwloc, implausible_nvlink_figures_are_refused)
{
	static char buf[8192];
	tp_test_alloc_reset();
	tp_nodetype *nt = (tp_nodetype *)1;
	char err[256];
	const char *xml = edited(buf, sizeof buf, "<u64values length=\"81\">0 50000 ",
	                         "<u64values length=\"96\">0 18446744073709551615 ");
	TP_ASSERT_ERR(load(xml, &nt, err), TP_EPARSE, err,
	              "the NVLinkBandwidth matrix gives OSDev nvml0 -> OSDev nvml1 "
	              "18446744073709551615 MB/s, above the 10000 GB/s believed");
	cr_assert_null(nt);
	TP_ASSERT_NO_LEAKS();
	/* 10 TB/s itself is believed */
	xml = edited(buf, sizeof buf, "<u64values length=\"81\">0 50000 ",
	             "<u64values length=\"84\">0 10000000 ");
	cr_assert_eq(load(xml, &nt, err), 0, "%s", err);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 10000.0, 1e-9);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* GPUs are numbered in bus-id order, not the file's: moving the first GPU to bus 0d makes it
 * GPU 3 (its NVLink figures move with it). */
Test(hwloc, gpus_in_bus_id_order)
{
	static char buf[8192];
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(mini_xml, &nt, err), 0, "%s", err);
	cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, 0), "0000:03:00.0");
	cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, 3), "0000:0b:00.0");
	tp_nodetype_destroy(nt);
	const char *xml = edited(buf, sizeof buf, "pci_busid=\"0000:03:00.0\"",
	                         "pci_busid=\"0000:0d:00.0\"");
	cr_assert_eq(load(xml, &nt, err), 0, "%s", err);
	static const char *const order[] = {"0000:04:00.0", "0000:0a:00.0", "0000:0b:00.0",
	                                    "0000:0d:00.0"};
	for (unsigned g = 0; g < 4; g++)
		cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, g), order[g]);
	/* nvml0 (now GPU 3) - nvml1 (now GPU 0): 50 GB/s direct plus 25 via the NVSwitch for nvml0
	 * only (nvml1 has no NVSwitch link) */
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 3, 0), 50.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 3, 1), 25.0, 1e-9);
	cr_assert_eq(tp_test_gpu_switch(nt, 3), tp_test_gpu_switch(nt, 0));
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* The kinds the importer gives: mlx5_0 (class 0207 with an OpenFabrics device) is RDMA, eth0
 * (class 0200, a Net device) plain Ethernet. */
Test(hwloc, nic_kinds)
{
	tp_nodetype *nt = NULL;
	char err[256];
	cr_assert_eq(load(mini_xml, &nt, err), 0, "%s", err);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 0), "mlx5_0");
	cr_assert_eq(tp_nodetype_nic_kind(nt, 0), TP_NIC_RDMA);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 1), "eth0");
	cr_assert_eq(tp_nodetype_nic_kind(nt, 1), TP_NIC_ETHERNET);
	/* GPUs 2 and 3 are behind the second switch, which has no NIC: the RDMA NIC, not eth0 */
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 2), 0);
	cr_assert_eq(tp_nodetype_nic_kind(nt, 2), TP_ENOTFOUND);
	tp_nodetype_destroy(nt);
}
