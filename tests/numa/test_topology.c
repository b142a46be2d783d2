/* Topology: cpulist parsing, a fake four-node sysfs tree (partitions, dm/md
 * slaves on one node and on mixed nodes, multipath, PCI ids), the
 * environment redirect, and the real machine. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "numa/numa_internal.h"
#include "pinio/numa.h"
#include "tests/common/helpers.h"

static const char *root;
static pinio_topo *topo;

static void setup(void)
{
    root = fake_sysfs_build();
    cr_assert_not_null(root, "building the fake sysfs tree failed");
    pinio_topo_opts o;
    pinio_topo_opts_default(&o);
    o.sysfs_root = root;
    cr_assert_eq(pinio_topo_open(&topo, &o), 0);
}

static void teardown(void)
{
    pinio_topo_close(topo);
    fake_sysfs_remove(root);
}

static int dev_node(unsigned maj, unsigned min)
{
    int node = 12345;
    pinio_diag d = { 0 };
    int rc = pinio_topo_node_of_dev(topo, maj, min, &node, &d);
    cr_assert_eq(rc, 0, "%u:%u: rc %d (%s)", maj, min, rc, d.msg);
    return node;
}

/* ---- cpulist ------------------------------------------------------------- */

Test(cpulist, ranges_and_singles)
{
    uint64_t m[2];
    cr_assert_eq(pinio__cpulist_parse("0-3,8-11\n", m, 2), 8);
    cr_assert_eq(m[0], 0xf0fULL);
    cr_assert_eq(m[1], 0);
    cr_assert_eq(pinio__cpulist_parse("5", m, 2), 1);
    cr_assert_eq(m[0], 1ULL << 5);
    cr_assert_eq(pinio__cpulist_parse("63-64", m, 2), 2);
    cr_assert_eq(m[0], 1ULL << 63);
    cr_assert_eq(m[1], 1);
    cr_assert_eq(pinio__cpulist_parse("", m, 2), 0, "a memory-only node lists no CPU");
    cr_assert_eq(pinio__cpulist_parse("\n", m, 2), 0);
    cr_assert_eq(pinio__cpulist_parse("0-3,2-5", m, 2), 6, "overlap counts once with a mask");
    cr_assert_eq(pinio__cpulist_parse("0-3,8-11", NULL, 0), 8);
}

Test(cpulist, rejects_malformed)
{
    static const char *const bad[] = { "3-1", "1,", ",1", "1,,2", "a", "1-", "-1",
                                       "1 2", " 1", "0-3:2/4", "1x", "99999999999" };
    uint64_t m[2];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(pinio__cpulist_parse(bad[i], m, 2), -EINVAL, "'%s' accepted", bad[i]);
    cr_assert_eq(pinio__cpulist_parse("128", m, 2), -ERANGE, "CPU beyond the mask");
    cr_assert_eq(pinio__cpulist_parse("0-2147483646", NULL, 0), 2147483647, "counting needs no loop");
    cr_assert_eq(pinio__cpulist_parse("0-2147483647", NULL, 0), -ERANGE, "count beyond INT_MAX");
}

Test(cpulist, contains)
{
    cr_assert(pinio__cpulist_contains("0-3,8-11", 9));
    cr_assert(pinio__cpulist_contains("0-3,8-11", 0));
    cr_assert(!pinio__cpulist_contains("0-3,8-11", 4));
    cr_assert(!pinio__cpulist_contains("0-3,8-11", 12));
    cr_assert(!pinio__cpulist_contains("0-3,x", 1), "malformed lists contain nothing");
}

/* ---- fake tree ------------------------------------------------------------- */

Test(topo_fake, nodes_and_cpus, .init = setup, .fini = teardown)
{
    cr_assert_eq(pinio_topo_node_count(topo), 4);
    int node;
    struct { int cpu, node; } cases[] = { { 0, 0 }, { 3, 0 }, { 9, 0 },  { 4, 1 },  { 13, 1 },
                                          { 16, 2 }, { 70, 2 }, { 17, -1 }, { 8, 0 }, { 15, 1 } };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(pinio_topo_node_of_cpu(topo, cases[i].cpu, &node), 0);
        cr_expect_eq(node, cases[i].node, "cpu %d: node %d, want %d", cases[i].cpu, node,
                     cases[i].node);
    }
    cr_assert_eq(pinio_topo_node_of_cpu(topo, -1, &node), -EINVAL);

    uint64_t m[2];
    cr_assert_eq(pinio_topo_node_cpus(topo, 0, m, 2), 8);
    cr_assert_eq(m[0], 0xf0fULL);
    cr_assert_eq(pinio_topo_node_cpus(topo, 2, m, 2), 2);
    cr_assert_eq(m[1], 1ULL << 6);
    cr_assert_eq(pinio_topo_node_cpus(topo, 2, m, 1), -ERANGE, "cpu 70 needs two words");
    cr_assert_eq(pinio_topo_node_cpus(topo, 3, m, 2), 0);
    cr_assert_eq(pinio_topo_node_cpus(topo, 7, m, 2), -ENOENT);
}

Test(topo_fake, node_ids_with_holes, .init = setup, .fini = teardown)
{
    cr_assert_eq(fake_sysfs_write(root, "devices/system/node/node9/cpulist", "40-41\n"), 0);
    cr_assert_eq(pinio_topo_node_count(topo), 10, "count is highest id + 1");
    int node;
    cr_assert_eq(pinio_topo_node_of_cpu(topo, 41, &node), 0);
    cr_assert_eq(node, 9, "missing node4..8 must not stop the search");
}

Test(topo_fake, plain_disks, .init = setup, .fini = teardown)
{
    cr_expect_eq(dev_node(259, 0), 0, "nvme0n1 on node 0");
    cr_expect_eq(dev_node(259, 2), 1, "nvme1n1: numa_node above the controller");
    cr_expect_eq(dev_node(259, 4), 3, "nvme2n1 on node 3");
    cr_expect_eq(dev_node(8, 0), 2, "sda: walk up a deep SCSI path to the HBA");
    cr_expect_eq(dev_node(254, 0), -1, "virtio: sysfs says -1");
    cr_expect_eq(dev_node(7, 0), -1, "loop: no numa_node anywhere");
}

Test(topo_fake, partitions_use_their_disk, .init = setup, .fini = teardown)
{
    cr_expect_eq(dev_node(259, 1), 0);
    cr_expect_eq(dev_node(259, 3), 1);
    /* The partition's own directory must not be searched as if it were a
     * disk with slaves: give it a bogus numa_node that must be ignored in
     * favour of the disk's path. */
    cr_assert_eq(fake_sysfs_write(root,
                                  "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/nvme/nvme1/nvme1n1/"
                                  "nvme1n1p1/numa_node",
                                  "3\n"),
                 0);
    cr_expect_eq(dev_node(259, 3), 1, "a partition is resolved through its parent disk");
}

Test(topo_fake, stacked_devices, .init = setup, .fini = teardown)
{
    cr_expect_eq(dev_node(253, 0), 1, "dm-0: both slaves on node 1");
    cr_expect_eq(dev_node(253, 1), -1, "dm-1: slaves on nodes 1 and 3");
    cr_expect_eq(dev_node(253, 2), -1, "dm-2: one slave without a node");
    cr_expect_eq(dev_node(9, 0), 1, "md0 on dm-0: stacked twice");
    cr_expect_eq(dev_node(259, 9), 3, "multipath head: through its controller path");
}

Test(topo_fake, loops_and_missing, .init = setup, .fini = teardown)
{
    int node = 7;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_topo_node_of_dev(topo, 253, 9, &node, &d), -ELOOP);
    cr_assert_eq(d.code, -ELOOP);
    cr_assert_not_null(strstr(d.msg, "dm-9"), "diag: %s", d.msg);
    cr_expect_eq(dev_node(8, 16), -1, "device not in sysfs");
    cr_expect_eq(dev_node(0, 45), -1, "major 0 (tmpfs-like)");
}

Test(topo_fake, file_through_fake_tree, .init = setup, .fini = teardown)
{
    /* A real file whose real st_dev is described by the fake tree as a disk
     * on node 2: node_of_file must go stat -> dev/block -> numa_node. */
    char path[256];
    cr_assert_eq(t_tmpname("/tmp", "topo", path, sizeof path), 0);
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    unsigned maj = major(st.st_dev), min = minor(st.st_dev);
    char rel[64];
    snprintf(rel, sizeof(rel), "dev/block/%u:%u", maj, min);
    char full[4200];
    snprintf(full, sizeof(full), "%s/%s", root, rel);
    unlink(full); /* the fake tree may describe this number already */
    cr_assert_eq(fake_sysfs_add_disk(root, maj, min, "0000:f0:01.0", 2), 0);
    int node = -7;
    cr_assert_eq(pinio_topo_node_of_file(topo, path, &node, NULL), 0);
    cr_expect_eq(node, 2);
    node = -7;
    cr_assert_eq(pinio_topo_node_of_fd(topo, fd, &node, NULL), 0);
    cr_expect_eq(node, 2);
    close(fd);
    unlink(path);
}

Test(topo_fake, pci_ids, .init = setup, .fini = teardown)
{
    int node = 9;
    cr_assert_eq(pinio_topo_node_of_pci(topo, "0000:3b:00.0", &node, NULL), 0);
    cr_expect_eq(node, 1);
    node = 9;
    cr_assert_eq(pinio_topo_node_of_pci(topo, "3B:00.0", &node, NULL), 0, "no domain, upper case");
    cr_expect_eq(node, 1);
    node = 9;
    cr_assert_eq(pinio_topo_node_of_pci(topo, "00000000:AF:00.0", &node, NULL), 0, "NVML form");
    cr_expect_eq(node, 3);
    cr_assert_eq(pinio_topo_node_of_pci(topo, "0000:00:02.0", &node, NULL), 0);
    cr_expect_eq(node, -1, "virtio PCI with numa_node -1");

    pinio_diag d = { 0 };
    cr_assert_eq(pinio_topo_node_of_pci(topo, "0000:99:00.0", &node, &d), -ENODEV);
    cr_assert_not_null(strstr(d.msg, "0000:99:00.0"), "diag: %s", d.msg);
    static const char *const bad[] = { "zz", "0000:3b:00", "0000:3b:00.8", "0000:3b:20.0",
                                       "0000:3b:100.0", "0000:13b:00.0", ":3b:00.0", "" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(pinio_topo_node_of_pci(topo, bad[i], &node, NULL), -EINVAL, "'%s'", bad[i]);
}

Test(topo_fake, environment_redirect, .init = setup, .fini = teardown)
{
    cr_assert_eq(setenv(PINIO_SYSFS_ROOT_ENV, root, 1), 0);
    cr_expect_eq(pinio_topo_node_count(NULL), 4, "NULL topo follows the environment");
    cr_expect_str_eq(pinio_topo_sysfs_root(NULL), root);
    int node = -5;
    cr_assert_eq(pinio_topo_node_of_dev(NULL, 253, 0, &node, NULL), 0);
    cr_expect_eq(node, 1);
    pinio_topo *t = NULL;
    cr_assert_eq(pinio_topo_open(&t, NULL), 0);
    cr_expect_str_eq(pinio_topo_sysfs_root(t), root, "open without options reads it too");
    pinio_topo_close(t);

    /* An explicit option beats the environment. */
    pinio_topo_opts o;
    pinio_topo_opts_default(&o);
    o.sysfs_root = "/nonexistent-pinio-root/";
    cr_assert_eq(pinio_topo_open(&t, &o), 0);
    cr_expect_str_eq(pinio_topo_sysfs_root(t), "/nonexistent-pinio-root", "trailing slash cut");
    cr_expect_eq(pinio_topo_node_count(t), 1, "no node directory: one node");
    cr_assert_eq(pinio_topo_node_of_dev(t, 259, 0, &node, NULL), 0);
    cr_expect_eq(node, -1);
    pinio_topo_close(t);
    unsetenv(PINIO_SYSFS_ROOT_ENV);
    cr_expect_str_eq(pinio_topo_sysfs_root(NULL), "/sys");
}

Test(topo, open_rejects_bad_options)
{
    pinio_topo *t = (pinio_topo *)0x1;
    pinio_topo_opts o;
    pinio_topo_opts_default(&o);
    o.sysfs_root = "relative/sys";
    cr_assert_eq(pinio_topo_open(&t, &o), -EINVAL);
    cr_assert_eq(t, (pinio_topo *)0x1, "untouched on failure");
    pinio_topo_opts_default(&o);
    o.struct_size = 1;
    cr_assert_eq(pinio_topo_open(&t, &o), -EINVAL);
    cr_assert_eq(pinio_topo_open(NULL, NULL), -EINVAL);
    int node;
    cr_assert_eq(pinio_topo_node_of_file(NULL, NULL, &node, NULL), -EINVAL);
    cr_assert_eq(pinio_topo_node_of_dev(NULL, 1, 1, NULL, NULL), -EINVAL);
}

/* ---- the real machine ---------------------------------------------------- */

Test(topo_real, this_machine)
{
    unsetenv(PINIO_SYSFS_ROOT_ENV);
    int count = pinio_topo_node_count(NULL);
    cr_assert_geq(count, 1);
    int node = -9;
    cr_assert_eq(pinio_topo_current_node(NULL, &node), 0);
    cr_assert(node >= 0 && node < count, "calling thread on node %d of %d", node, count);

    /* cpu 0 always exists and belongs to some node on a NUMA kernel. */
    cr_assert_eq(pinio_topo_node_of_cpu(NULL, 0, &node), 0);
    cr_assert(node >= -1 && node < count);

    pinio_diag d = { 0 };
    cr_assert_eq(pinio_topo_node_of_file(NULL, "/", &node, &d), 0, "%s", d.msg);
    cr_assert(node >= -1 && node < count, "/ on node %d", node);
    cr_log_info("node of / = %d (of %d nodes)", node, count);
}

Test(topo_real, tmpfs_has_no_device)
{
    unsetenv(PINIO_SYSFS_ROOT_ENV);
    char path[256];
    cr_assert_eq(t_tmpname("/dev/shm", "topo", path, sizeof path), 0);
    int fd = mkstemp(path);
    if (fd < 0)
        cr_skip_test("no /dev/shm on this machine");
    int node = 5;
    int rc = pinio_topo_node_of_file(NULL, path, &node, NULL);
    close(fd);
    unlink(path);
    cr_assert_eq(rc, 0);
    cr_assert_eq(node, -1, "tmpfs (major 0) has no block device");
}

Test(topo_real, missing_file)
{
    int node = 5;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_topo_node_of_file(NULL, "/nonexistent/pinio", &node, &d), -ENOENT);
    cr_assert_eq(node, 5, "untouched on failure");
    cr_assert_eq(d.code, -ENOENT);
    cr_assert_not_null(strstr(d.msg, "/nonexistent/pinio"), "diag: %s", d.msg);
}
