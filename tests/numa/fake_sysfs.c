/* Builds the fake sysfs tree described in fake_sysfs.h. */
#include "fake_sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common/helpers.h"

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(buf, 0755) == 0 || errno == EEXIST) ? 0 : -1;
}

int fake_sysfs_write(const char *root, const char *rel, const char *content)
{
    char path[2 * PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (mkdir_p(path) != 0)
        return -1;
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t n = strlen(content);
    int ok = write(fd, content, n) == (ssize_t)n;
    close(fd);
    return ok ? 0 : -1;
}

static int mkdir_rel(const char *root, const char *rel)
{
    char path[2 * PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    return mkdir_p(path);
}

/* Creates root/link as a symlink to `target` (relative to the link's dir, as
 * the kernel does). */
static int link_rel(const char *root, const char *link, const char *target)
{
    char path[2 * PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s", root, link);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (mkdir_p(path) != 0)
        return -1;
    *slash = '/';
    return symlink(target, path);
}

/* A disk directory with its dev attribute, and the dev/block link to it. */
static int disk(const char *root, const char *dir, unsigned major, unsigned minor, int partition)
{
    char rel[2 * PATH_MAX + 16], val[32], link[64], target[2 * PATH_MAX + 16];
    snprintf(val, sizeof(val), "%u:%u\n", major, minor);
    snprintf(rel, sizeof(rel), "%s/dev", dir);
    if (fake_sysfs_write(root, rel, val) != 0)
        return -1;
    if (partition) {
        snprintf(rel, sizeof(rel), "%s/partition", dir);
        if (fake_sysfs_write(root, rel, "1\n") != 0)
            return -1;
    }
    snprintf(link, sizeof(link), "dev/block/%u:%u", major, minor);
    snprintf(target, sizeof(target), "../../%s", dir);
    return link_rel(root, link, target);
}

int fake_sysfs_add_disk(const char *root, unsigned major, unsigned minor, const char *pci, int node)
{
    char rel[PATH_MAX], val[16];
    snprintf(rel, sizeof(rel), "devices/pci0000:f0/%s/numa_node", pci);
    snprintf(val, sizeof(val), "%d\n", node);
    if (fake_sysfs_write(root, rel, val) != 0)
        return -1;
    snprintf(rel, sizeof(rel), "devices/pci0000:f0/%s/nvme/nvme%u/nvme%un1", pci, minor, minor);
    return disk(root, rel, major, minor, 0);
}

static char root_buf[PATH_MAX];

#define N0 "devices/pci0000:00/0000:00:1d.0"
#define N1 "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
#define N1B "devices/pci0000:3a/0000:3a:00.0/0000:3c:00.0"
#define N3 "devices/pci0000:ae/0000:ae:00.0/0000:af:00.0"

const char *fake_sysfs_build(void)
{
    if (t_tmpdir("/tmp", "sysfs", root_buf, sizeof(root_buf)))
        return NULL;
    const char *r = root_buf;
    int bad = 0;
    bad |= fake_sysfs_write(r, "devices/system/node/node0/cpulist", "0-3,8-11\n");
    bad |= fake_sysfs_write(r, "devices/system/node/node1/cpulist", "4-7,12-15\n");
    bad |= fake_sysfs_write(r, "devices/system/node/node2/cpulist", "16,70\n");
    bad |= fake_sysfs_write(r, "devices/system/node/node3/cpulist", "\n");
    bad |= fake_sysfs_write(r, "devices/system/node/online", "0-3\n");
    bad |= fake_sysfs_write(r, "devices/system/node/possible", "0-3\n");

    bad |= fake_sysfs_write(r, N0 "/numa_node", "0\n");
    bad |= disk(r, N0 "/nvme/nvme0/nvme0n1", 259, 0, 0);
    bad |= disk(r, N0 "/nvme/nvme0/nvme0n1/nvme0n1p1", 259, 1, 1);

    bad |= fake_sysfs_write(r, "devices/pci0000:3a/0000:3a:00.0/numa_node", "1\n");
    bad |= fake_sysfs_write(r, N1 "/numa_node", "1\n");
    bad |= disk(r, N1 "/nvme/nvme1/nvme1n1", 259, 2, 0);
    bad |= disk(r, N1 "/nvme/nvme1/nvme1n1/nvme1n1p1", 259, 3, 1);
    bad |= fake_sysfs_write(r, N1B "/numa_node", "1\n");
    bad |= disk(r, N1B "/nvme/nvme3/nvme3n1", 259, 5, 0);

    bad |= fake_sysfs_write(r, N3 "/numa_node", "3\n");
    bad |= disk(r, N3 "/nvme/nvme2/nvme2n1", 259, 4, 0);
    bad |= mkdir_rel(r, N3 "/nvme/nvme4/nvme4c4n1");
    bad |= disk(r, "devices/virtual/nvme-subsystem/nvme-subsys4/nvme4n1", 259, 9, 0);
    bad |= link_rel(r, "devices/virtual/nvme-subsystem/nvme-subsys4/nvme4n1/multipath/nvme4c4n1",
                    "../../../../../pci0000:ae/0000:ae:00.0/0000:af:00.0/nvme/nvme4/nvme4c4n1");

    bad |= fake_sysfs_write(r, "devices/pci0000:00/0000:00:17.0/numa_node", "2\n");
    bad |= disk(r, "devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda", 8, 0, 0);
    bad |= link_rel(r, "devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/device",
                    "../../../0:0:0:0");

    bad |= fake_sysfs_write(r, "devices/pci0000:00/0000:00:02.0/numa_node", "-1\n");
    bad |= disk(r, "devices/pci0000:00/0000:00:02.0/virtio1/block/vda", 254, 0, 0);

    bad |= disk(r, "devices/virtual/block/loop0", 7, 0, 0);

    bad |= disk(r, "devices/virtual/block/dm-0", 253, 0, 0);
    bad |= link_rel(r, "devices/virtual/block/dm-0/slaves/nvme1n1p1",
                    "../../../../pci0000:3a/0000:3a:00.0/0000:3b:00.0/nvme/nvme1/nvme1n1/nvme1n1p1");
    bad |= link_rel(r, "devices/virtual/block/dm-0/slaves/nvme3n1",
                    "../../../../pci0000:3a/0000:3a:00.0/0000:3c:00.0/nvme/nvme3/nvme3n1");
    bad |= disk(r, "devices/virtual/block/dm-1", 253, 1, 0);
    bad |= link_rel(r, "devices/virtual/block/dm-1/slaves/nvme1n1",
                    "../../../../pci0000:3a/0000:3a:00.0/0000:3b:00.0/nvme/nvme1/nvme1n1");
    bad |= link_rel(r, "devices/virtual/block/dm-1/slaves/nvme2n1",
                    "../../../../pci0000:ae/0000:ae:00.0/0000:af:00.0/nvme/nvme2/nvme2n1");
    bad |= disk(r, "devices/virtual/block/dm-2", 253, 2, 0);
    bad |= link_rel(r, "devices/virtual/block/dm-2/slaves/nvme0n1",
                    "../../../../pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1");
    bad |= link_rel(r, "devices/virtual/block/dm-2/slaves/loop0", "../../loop0");
    bad |= disk(r, "devices/virtual/block/dm-9", 253, 9, 0);
    bad |= link_rel(r, "devices/virtual/block/dm-9/slaves/dm-9", "../../dm-9");
    bad |= disk(r, "devices/virtual/block/md0", 9, 0, 0);
    bad |= link_rel(r, "devices/virtual/block/md0/slaves/dm-0", "../../dm-0");

    bad |= link_rel(r, "bus/pci/devices/0000:3b:00.0",
                    "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    bad |= link_rel(r, "bus/pci/devices/0000:00:02.0", "../../../devices/pci0000:00/0000:00:02.0");
    bad |= link_rel(r, "bus/pci/devices/0000:00:1d.0", "../../../devices/pci0000:00/0000:00:1d.0");
    bad |= link_rel(r, "bus/pci/devices/0000:af:00.0",
                    "../../../devices/pci0000:ae/0000:ae:00.0/0000:af:00.0");
    if (bad) {
        fake_sysfs_remove(r);
        return NULL;
    }
    return r;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void fake_sysfs_remove(const char *root)
{
    if (root && strncmp(root, "/tmp/pinio-", 11) == 0 && strstr(root, "-sysfs-"))
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
